"""Transactional producers and read_committed consumers of every client stack, for the interop tests
(test_txn_interop.py standalone, tests/cluster/test_txn_interop_cluster.py on 3 brokers).

Every producer writes the same shape to its own topic (3 partitions, COUNT records per transaction,
round-robin): a committed transaction (`<prefix>-c-<i>`, with the offset 7 of SOURCE-0 for its group
committed inside it), an aborted one (`<prefix>-a-<i>`, offset 99), and a second committed one
(`<prefix>-d-<i>`). A read_committed consumer must read exactly the two committed transactions' records:
none of the aborted one (which lies between them, so reading the last committed record means it was
skipped) and each once; the group's committed offset must be 7.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

COUNT = 30
SOURCE = "txn-source"
STACKS = ("confluent", "kafka-python", "aiokafka", "kafkajs")
KAFKAJS = Path(__file__).resolve().parent / "kafkajs"


def expected(prefix: str) -> set[str]:
    return {f"{prefix}-{k}-{i}" for k in ("c", "d") for i in range(COUNT)}


def _steps(prefix: str) -> list[tuple[str, int | None, bool]]:
    return [(f"{prefix}-c", 7, True), (f"{prefix}-a", 99, False), (f"{prefix}-d", None, True)]


# --- producers -------------------------------------------------------------------------------------------


def produce_confluent(bootstrap: str, topic: str, txn_id: str, group: str, prefix: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    meta_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    meta = meta_consumer.consumer_group_metadata()
    meta_consumer.close()
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(60)
    for name, offset, commit in _steps(prefix):
        p.begin_transaction()
        for i in range(COUNT):
            p.produce(topic, f"{name}-{i}".encode(), partition=i % 3)
        if offset is not None:
            p.send_offsets_to_transaction([TopicPartition(SOURCE, 0, offset)], meta, 60)
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
    p.flush(30)


def produce_kafka_python(bootstrap: str, topic: str, txn_id: str, group: str, prefix: str) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, request_timeout_ms=30000)
    try:
        p.init_transactions()
        for name, offset, commit in _steps(prefix):
            p.begin_transaction()
            for i in range(COUNT):
                p.send(topic, f"{name}-{i}".encode(), partition=i % 3)
            if offset is not None:
                p.send_offsets_to_transaction(
                    {TopicPartition(SOURCE, 0): OffsetAndMetadata(offset, "", -1)}, group
                )
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close(timeout=30)


def produce_aiokafka(bootstrap: str, topic: str, txn_id: str, group: str, prefix: str) -> None:
    from aiokafka import AIOKafkaProducer, TopicPartition

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, request_timeout_ms=30000)
        await p.start()
        try:
            for name, offset, commit in _steps(prefix):
                await p.begin_transaction()
                for i in range(COUNT):
                    await p.send(topic, f"{name}-{i}".encode(), partition=i % 3)
                if offset is not None:
                    await p.send_offsets_to_transaction({TopicPartition(SOURCE, 0): offset}, group)
                if commit:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), 180))


def _node(*args: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "node is required for the kafkajs tests (`make test` checks for it)"
    assert (KAFKAJS / "node_modules" / "kafkajs").is_dir(), "kafkajs is not installed: run `make test`"
    proc = subprocess.run(
        [node, str(KAFKAJS / "txn.js"), *args], capture_output=True, timeout=300, cwd=KAFKAJS
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    out: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    return out


def produce_kafkajs(bootstrap: str, topic: str, txn_id: str, group: str, prefix: str) -> None:
    assert _node("produce", bootstrap, topic, txn_id, group, SOURCE, prefix, str(COUNT))["ok"]


PRODUCERS: dict[str, Callable[[str, str, str, str, str], None]] = {
    "confluent": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
    "kafkajs": produce_kafkajs,
}


# --- read_committed consumers ----------------------------------------------------------------------------


def consume_confluent(bootstrap: str, topic: str, count: int) -> list[str]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{topic}", "isolation.level": "read_committed",
                  "enable.auto.commit": False})  # fmt: skip
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    out: list[str] = []
    deadline = time.monotonic() + 120
    try:
        while len(out) < count and time.monotonic() < deadline:
            out += [(m.value() or b"").decode() for m in c.consume(500, 0.2) if m.error() is None]
    finally:
        c.close()
    return out


def consume_kafka_python(bootstrap: str, topic: str, count: int) -> list[str]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                      auto_offset_reset="earliest", group_id=None)  # fmt: skip
    c.assign([TopicPartition(topic, p) for p in range(3)])
    c.seek_to_beginning()
    out: list[str] = []
    deadline = time.monotonic() + 120
    try:
        while len(out) < count and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                out += [r.value.decode() for r in recs]
    finally:
        c.close()
    return out


def consume_aiokafka(bootstrap: str, topic: str, count: int) -> list[str]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[str]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest")  # fmt: skip
        await c.start()
        out: list[str] = []
        try:
            c.assign([TopicPartition(topic, p) for p in range(3)])
            await c.seek_to_beginning()
            deadline = time.monotonic() + 120
            while len(out) < count and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    out += [r.value.decode() for r in recs if r.value is not None]
        finally:
            await c.stop()
        return out

    return asyncio.run(run())


def consume_kafkajs(bootstrap: str, topic: str, count: int) -> list[str]:
    values: list[str] = _node("consume", bootstrap, topic, str(count))["values"]
    return values


CONSUMERS: dict[str, Callable[[str, str, int], list[str]]] = {
    "confluent": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
    "kafkajs": consume_kafkajs,
}


def committed_offset(bootstrap: str, group: str) -> int:
    """The group's committed offset of SOURCE-0, as a read_committed (require_stable) consumer fetches it."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        deadline = time.monotonic() + 60
        while True:  # the markers follow EndTxn's answer: unstable (retried by the client) until then
            (tp,) = c.committed([TopicPartition(SOURCE, 0)], timeout=30)
            if tp.offset == 7 or time.monotonic() > deadline:
                return int(tp.offset)
            time.sleep(0.1)
    finally:
        c.close()


def check_stack(bootstrap: str, producer: str, make_topic: Callable[[str, int], None]) -> dict[str, Any]:
    """Produce with `producer`, read with every stack; returns what each consumer got that it should not
    have (empty lists when all is well) and the group's committed offset."""
    topic = f"txn-{producer}"
    make_topic(topic, 3)
    prefix = producer.replace("-", "")
    group = f"eos-{producer}"
    PRODUCERS[producer](bootstrap, topic, f"tx-{producer}", group, prefix)
    want = expected(prefix)
    report: dict[str, Any] = {"committed_offset": committed_offset(bootstrap, group)}
    for name, consume in CONSUMERS.items():
        got = consume(bootstrap, topic, len(want))
        report[name] = {
            "aborted_seen": sorted(v for v in got if f"{prefix}-a-" in v)[:5],
            "missing": sorted(want - set(got))[:5],
            "duplicates": len(got) - len(set(got)),
        }
    return report


def clean(report: dict[str, Any]) -> bool:
    return report["committed_offset"] == 7 and all(
        not r["aborted_seen"] and not r["missing"] and not r["duplicates"]
        for k, r in report.items()
        if k != "committed_offset"
    )


def ensure_topic(bootstrap: str, name: str, partitions: int, replication_factor: int = 1) -> None:
    """Create a topic; one that exists already is fine (the tests share a broker)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (fut,) = admin.create_topics([NewTopic(name, partitions, replication_factor)]).values()
    try:
        fut.result(120)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
