"""Consumer-group members run as subprocesses by the group tests (holds no tests itself).

`python -c "from tests.integration.test_groups_workers import main; main()" KIND BOOTSTRAP TOPIC GROUP`
subscribes with KIND in confluent | kafka-python | aiokafka (roundrobin, the assignor all three
share), and prints one JSON line per consumed record {"ev": "rec", "p", "o"} and per successful
synchronous commit {"ev": "commit", "p", "o"} (o = the next offset to read), until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

SESSION_MS = 6000
HEARTBEAT_MS = 1000


def emit(ev: str, partition: int, offset: int) -> None:
    print(json.dumps({"ev": ev, "p": partition, "o": offset}), flush=True)


def run_confluent(bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import Consumer, KafkaException

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "partition.assignment.strategy": "roundrobin",
        }
    )
    c.subscribe([topic])
    while True:
        msgs = c.consume(200, 0.5)
        got = [m for m in msgs if m.error() is None]
        for m in got:
            emit("rec", m.partition() or 0, m.offset() or 0)
        if got:
            try:
                for tp in c.commit(asynchronous=False) or []:
                    if tp.error is None and tp.offset >= 0:
                        emit("commit", tp.partition, tp.offset)
            except KafkaException:
                pass  # a rebalance came between consume and commit: those records come again


def run_kafka_python(bootstrap: str, topic: str, group: str) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        partition_assignment_strategy=[RoundRobinPartitionAssignor],
    )
    while True:
        batch = c.poll(timeout_ms=500)
        offsets: dict[Any, Any] = {}
        for tp, recs in batch.items():
            for r in recs:
                emit("rec", tp.partition, r.offset)
            offsets[tp] = OffsetAndMetadata(recs[-1].offset + 1, "", -1)
        if offsets:
            try:
                c.commit(offsets)
            except KafkaError:
                continue
            for tp, om in offsets.items():
                emit("commit", tp.partition, om.offset)


async def run_aiokafka(bootstrap: str, topic: str, group: str) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        partition_assignment_strategy=(RoundRobinPartitionAssignor,),
    )
    await c.start()
    while True:
        batch = await c.getmany(timeout_ms=500)
        offsets = {}
        for tp, recs in batch.items():
            for r in recs:
                emit("rec", tp.partition, r.offset)
            offsets[tp] = recs[-1].offset + 1
        if offsets:
            try:
                await c.commit(offsets)
            except KafkaError:
                continue
            for tp, o in offsets.items():
                emit("commit", tp.partition, o)


def main(argv: list[str] | None = None) -> None:
    kind, bootstrap, topic, group = (argv or sys.argv[1:])[:4]
    if kind == "confluent":
        run_confluent(bootstrap, topic, group)
    elif kind == "kafka-python":
        run_kafka_python(bootstrap, topic, group)
    elif kind == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, topic, group))
    else:
        raise SystemExit(f"unknown worker kind {kind}")
