"""A consumer placed past the log end (or before its start) resets as `auto.offset.reset` says.

Regression for issue 15: partition-level Fetch errors were encoded with null records (MessageSetSize -1),
which librdkafka rejects as a parse failure for the whole response, so it never saw OFFSET_OUT_OF_RANGE,
never reset, and spun. Kafka encodes them with empty records (size 0).
"""

from __future__ import annotations

import time
import uuid

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import create_topics, produce_confluent
from tests.integration.raw_client import Raw

TEN = 10


def _topic_with_ten(bootstrap: str) -> str:
    from tests.integration.clients import Rec

    topic = f"oor-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, {topic: 1})
    recs = [Rec(0, f"k{i}".encode(), f"v{i}".encode(), (), 0) for i in range(TEN)]
    produce_confluent(bootstrap, topic, recs)
    return topic


def _consume_from(
    bootstrap: str, topic: str, offset: int, reset: str, want: int, limit_s: float
) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": reset,
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        got: list[int] = []
        deadline = time.monotonic() + limit_s
        while len(got) < want and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error() and (at := m.offset()) is not None:
                got.append(at)
        return got
    finally:
        c.close()


def test_confluent_consumer_past_the_end_resets_to_earliest(bootstrap: str) -> None:
    topic = _topic_with_ten(bootstrap)
    start = time.monotonic()
    got = _consume_from(bootstrap, topic, 1000, "earliest", TEN, 30.0)
    assert got == list(range(TEN)), got
    # The reset is immediate once the error is readable (librdkafka spun forever before the fix).
    assert time.monotonic() - start < 15.0


def test_confluent_consumer_past_the_end_resets_to_latest(bootstrap: str) -> None:
    topic = _topic_with_ten(bootstrap)
    from confluent_kafka import Consumer, TopicPartition

    from tests.integration.clients import Rec

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "latest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 1000)])
        # Keep producing (bounded) until the consumer has reset to the end and reads what comes after:
        # a reset to latest never shows the ten old records.
        got: list[int] = []
        for i in range(60):
            produce_confluent(bootstrap, topic, [Rec(0, b"new", b"after-%d" % i, (), 0)])
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                m = c.poll(0.1)
                if m is not None and not m.error() and (at := m.offset()) is not None:
                    got.append(at)
            if got:
                break
        assert got, "the consumer never reset to latest"
        assert min(got) >= TEN, got
    finally:
        c.close()


def test_out_of_range_fetch_carries_empty_records_not_null(session_broker: BrokerProcess) -> None:
    """Byte level: the partition's records field is an int32 length 0 (v4-v11 are not flexible)."""
    topic = _topic_with_ten(session_broker.bootstrap)
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 1000,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    },
                    {
                        "partition": 7,  # no such partition
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    },
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    c = Raw(session_broker.port)
    try:
        resp = c.call(1, 11, body)
    finally:
        c.close()
    parts = resp["responses"][0]["partitions"]
    assert [p["error_code"] for p in parts] == [1, 3]  # OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION
    for p in parts:
        assert p["records"] is not None and len(bytes(p["records"])) == 0, p
    assert parts[0]["high_watermark"] == TEN


def test_kcat_past_the_end_resets_to_earliest(bootstrap: str) -> None:
    """kcat (Debian's librdkafka 2.0.2) logged "invalid MessageSetSize -1" a thousand times a second."""
    import subprocess

    from tests.integration.clients import kcat_path

    topic = _topic_with_ten(bootstrap)
    out = subprocess.run(
        [
            kcat_path(),
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "1000",
            "-c",
            str(TEN),
            "-X",
            "auto.offset.reset=earliest",
            "-f",
            "%o\n",
            "-q",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.decode().split() == [str(i) for i in range(TEN)]
    assert b"MessageSetSize" not in out.stderr
