"""Consumers of all four client stacks, placed out of range on both ends, reset as `auto.offset.reset` says.

Issue 15: an out-of-range position (a committed offset deleted by retention or the disk budget, or one past
the end after a restore) is the most ordinary event of an edge broker's life; every stack must see
OFFSET_OUT_OF_RANGE in a Fetch answer it can parse and reset (within about a second on a quiet machine: a
figure printed per case, not a bound asserted here, since a loaded 2-core machine stretches it; a stack
that never resets fails at GIVE_UP_S).

Each case: a one-partition topic with ten records (offsets 0-9); "before start" cases delete records below 5
first. The consumer starts at 1000 (past the end) or 2 (before the start). A producer appends one record
every 50 ms from the moment the consumer is placed, noting when each offset was acknowledged, so a reset to
latest is timed too: the log end at the reset was an offset acknowledged after it, so that acknowledgement
time bounds the reset time from above. A reset to earliest is timed to the first record received; for
librdkafka that includes its own fetch.error.backoff.ms (500 ms, as against Kafka), so its reset is also
timed by its "offset reset" log line.
Confluent-kafka, kafka-python and aiokafka assign + seek; kafkajs (no assign) starts from a committed
offset of its group, the realistic case, and is timed from its group join.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import Rec, create_topics, produce_confluent
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

TEN = 10
LOG_START = 5  # after the "before start" cases' DeleteRecords
GIVE_UP_S = 30.0
HERE = Path(__file__).resolve().parent / "kafkajs"


def _topic(session_broker: BrokerProcess, before_start: bool) -> str:
    topic = f"reset-{uuid.uuid4().hex[:8]}"
    create_topics(session_broker.bootstrap, {topic: 1})
    produce_confluent(session_broker.bootstrap, topic, [Rec(0, None, b"v%d" % i, (), 0) for i in range(TEN)])
    if before_start:
        raw = Raw(session_broker.port)
        try:
            resp = raw.call(
                21,
                1,
                {
                    "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": LOG_START}]}],
                    "timeout_ms": 10000,
                },
            )
        finally:
            raw.close()
        assert resp["topics"][0]["partitions"][0]["error_code"] == 0, resp
    return topic


class Appender:
    """Appends one record every 50 ms in a thread; `acked[offset]` is the monotonic acknowledgement time."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.acked: dict[int, float] = {}
        self._p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is None:
            self.acked[msg.offset()] = time.monotonic()  # type: ignore[attr-defined]

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set() and i < 1000:
            self._p.produce(self.topic, value=b"after-%d" % i, partition=0, on_delivery=self._on_delivery)
            self._p.flush(10)
            i += 1
            self._stop.wait(0.05)

    def __enter__(self) -> Appender:
        self._p.flush(10)  # connect and learn the topic before the clock starts
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


class _ResetLogged(logging.Handler):
    """librdkafka's "offset reset" log line: the moment it reset, before its fetch.error.backoff.ms
    (500 ms) delays the next fetch, which is the client's own pacing (it waits as long against Kafka)."""

    def __init__(self) -> None:
        super().__init__()
        self.at: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.at is None and "offset reset" in record.getMessage():
            self.at = time.monotonic()


CONFLUENT_RESET: dict[str, float] = {}  # topic -> when librdkafka logged its reset


def _confluent(bootstrap: str, topic: str, start: int, reset: str, on_placed: Callable[[], None]) -> int:
    from confluent_kafka import Consumer, TopicPartition

    logged = _ResetLogged()
    rd_log = logging.getLogger(f"rdkafka.{topic}")
    rd_log.addHandler(logged)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": reset,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        },
        logger=rd_log,
    )
    try:
        c.assign([TopicPartition(topic, 0, start)])
        on_placed()
        try:
            return _confluent_first(c, logged, topic)
        finally:
            rd_log.removeHandler(logged)
    finally:
        c.close()


def _confluent_first(c: Any, logged: _ResetLogged, topic: str) -> int:
    deadline = time.monotonic() + GIVE_UP_S
    while time.monotonic() < deadline:
        m = c.poll(0.05)
        if logged.at is not None:
            CONFLUENT_RESET[topic] = logged.at
        if m is not None and not m.error():
            off = m.offset()
            assert off is not None
            return int(off)
    raise AssertionError("confluent-kafka never reset")


def _python_consumer_config(bootstrap: str, reset: str) -> dict[str, object]:
    """kafka-python and aiokafka share these keyword arguments."""
    return {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": reset,
        "fetch_max_wait_ms": 100,
    }


def _kafka_python(bootstrap: str, topic: str, start: int, reset: str, on_placed: Callable[[], None]) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(**_python_consumer_config(bootstrap, reset))
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, start)
        on_placed()
        deadline = time.monotonic() + GIVE_UP_S
        while time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=50).values():
                return int(msgs[0].offset)
        raise AssertionError("kafka-python never reset")
    finally:
        c.close()


def _aiokafka(bootstrap: str, topic: str, start: int, reset: str, on_placed: Callable[[], None]) -> int:
    async def run() -> int:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        c = AIOKafkaConsumer(**_python_consumer_config(bootstrap, reset))
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, start)
            on_placed()
            deadline = time.monotonic() + GIVE_UP_S
            while time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=50)).values():
                    return int(msgs[0].offset)
            raise AssertionError("aiokafka never reset")
        finally:
            await c.stop()

    return asyncio.run(run())


STACKS = {"confluent-kafka": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka}
CASES = [("past-end", 1000), ("before-start", 2)]


def _record(key: str, seconds: float) -> None:
    print(f"reset {key}: {seconds * 1000:.0f} ms")  # shown with -s: the figures of the report


@pytest.mark.parametrize("reset", ["earliest", "latest"])
@pytest.mark.parametrize(("where", "start"), CASES)
@pytest.mark.parametrize("stack", list(STACKS))
def test_python_stack_resets(
    session_broker: BrokerProcess, stack: str, where: str, start: int, reset: str
) -> None:
    topic = _topic(session_broker, where == "before-start")
    placed: list[float] = []
    with Appender(session_broker.bootstrap, topic) as app:
        first = STACKS[stack](
            session_broker.bootstrap, topic, start, reset, lambda: placed.append(time.monotonic())
        )
        got_at = time.monotonic()
    if reset == "earliest":
        assert first == (LOG_START if where == "before-start" else 0), first
        took = got_at - placed[0]
    else:
        assert first >= TEN, f"reset to latest must skip the old records, got offset {first}"
        took = app.acked[first] - placed[0]
    _record(f"{stack} {where} {reset}", took)
    if stack == "confluent-kafka":  # it reset because of OFFSET_OUT_OF_RANGE, not by another path
        assert topic in CONFLUENT_RESET, "librdkafka logged no offset reset"
        _record(f"{stack} {where} {reset} (reset logged)", CONFLUENT_RESET[topic] - placed[0])


def _commit(port: int, group: str, topic: str, offset: int) -> None:
    """The group's committed offset (OffsetCommit v2 as a simple, group-less client commits)."""
    raw = Raw(port)
    try:
        resp = raw.call(
            8,
            2,
            {
                "group_id": group,
                "generation_id": -1,
                "member_id": "",
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}
                        ],
                    }
                ],
            },
        )
    finally:
        raw.close()
    assert resp["topics"][0]["partitions"][0]["error_code"] == 0, resp


@pytest.mark.parametrize("reset", ["earliest", "latest"])
@pytest.mark.parametrize(("where", "start"), CASES)
def test_kafkajs_resets(session_broker: BrokerProcess, where: str, start: int, reset: str) -> None:
    node = shutil.which("node")
    assert node, "node is required for the kafkajs test (`make test` checks for it)"
    assert (HERE / "node_modules" / "kafkajs").is_dir(), "kafkajs is not installed: run `make test`"
    topic = _topic(session_broker, where == "before-start")
    group = f"kjs-{uuid.uuid4().hex[:8]}"
    _commit(session_broker.port, group, topic, start)
    proc = subprocess.run(
        [node, str(HERE / "out_of_range.js"), session_broker.bootstrap, topic, group, reset],
        capture_output=True,
        timeout=120,
        cwd=HERE,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    out = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    if reset == "earliest":
        assert out["first_offset"] == (LOG_START if where == "before-start" else 0), out
    else:
        assert out["first_offset"] >= TEN, out
    assert out["reset_ms"] is not None, out
    took = out["reset_ms"] / 1000
    _record(f"kafkajs {where} {reset}", took)
