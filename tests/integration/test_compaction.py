"""Compaction against a real kafkad: a compacted topic shrinks to one record per key, consumers see the
latest value of every key, and __consumer_offsets stays bounded under many commits.

KAFKAD_TEST_COMPACT_RECORDS (default 200000) sets the number of updates (over 1000 keys).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkad.storage.checkpoints import read_offsets
from kafkad.storage.records import iter_batches
from tests.integration.broker_process import BrokerProcess
from tests.integration.test_groups_support import wait_for

pytestmark = pytest.mark.integration

RECORDS = int(os.environ.get("KAFKAD_TEST_COMPACT_RECORDS", "200000"))
KEYS = 1000
SEGMENT_BYTES = 1 << 20
VALUE_RANDOM_BYTES = 40


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    overrides = {
        "num.partitions": "1",
        "log.cleaner.backoff.ms": "200",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.segment.bytes": "65536",
        "log.segment.delete.delay.ms": "0",
    }
    with BrokerProcess(tmp_path / "kafkad", overrides) as b:
        yield b


def _log_files(part_dir: Path) -> list[Path]:
    return sorted(part_dir.glob("*.log"))


def _records_in(paths: list[Path]) -> int:
    return sum(len(b.records) for p in paths for b in iter_batches(p.read_bytes(), verify_crc=False))


def _fully_cleaned(broker: BrokerProcess, topic: str) -> bool:
    part = broker.data_dir / f"{topic}-0"
    files = _log_files(part)
    if len(files) < 2:
        return False
    active_base = int(files[-1].name[:20])
    cleaned_to = read_offsets(broker.data_dir / "cleaner-offset-checkpoint").get((topic, 0))
    return cleaned_to == active_base


def test_compacted_topic_shrinks_to_latest_values(broker: BrokerProcess) -> None:
    topic = "compacted"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": str(SEGMENT_BYTES),
        "min.cleanable.dirty.ratio": "0.01",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(60)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    latest: dict[bytes, bytes] = {}
    for i in range(RECORDS):
        key = f"key-{i % KEYS:04d}".encode()
        # Incompressible values: the bytes on disk then follow the record count, not lz4's luck with how
        # linger.ms happened to batch them, and the cleaner (racing the producer) can't skew the baseline.
        value = f"value-{i:08d}-".encode() + os.urandom(VALUE_RANDOM_BYTES)
        latest[key] = value
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    part = broker.data_dir / f"{topic}-0"
    written_floor = RECORDS * VALUE_RANDOM_BYTES  # what the log held before any cleaning, at least

    wait_for(lambda: _fully_cleaned(broker, topic), 300, "the cleaner to reach the active segment")
    files = _log_files(part)
    closed, active = files[:-1], files[-1]
    assert _records_in(closed) == KEYS  # one record per key below the active segment
    size_after = sum(p.stat().st_size for p in files)
    assert size_after < written_floor / 5 and size_after < 2 * SEGMENT_BYTES

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "compaction-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: dict[bytes, bytes] = {}
    count = 0
    expected = KEYS + _records_in([active])
    deadline = time.monotonic() + 180
    while count < expected:
        msg = consumer.poll(1)
        if msg is None:
            assert time.monotonic() < deadline, f"consumer got {count} of {expected} records in 180 s"
            continue
        assert msg.error() is None, msg.error()
        got_key, got_value = msg.key(), msg.value()
        assert got_key is not None and got_value is not None
        seen[got_key] = got_value
        count += 1
    consumer.close()
    assert seen == latest
    passes = re.findall(r"cleaned: .*?([0-9.]+) MB/s, ([0-9]+) records/s", broker.log_text())
    assert passes, "the broker logged no cleaning"
    print(  # the figures for reports (pytest -s)
        f"compaction: {RECORDS} updates, >= {written_floor / 1e6:.1f} MB -> {size_after / 1e6:.2f} MB, "
        f"{len(passes)} passes, best {max(float(m) for m, _ in passes):.1f} MB/s "
        f"{max(int(r) for _, r in passes)} records/s"
    )


def test_consumer_offsets_stay_bounded(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(60)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "committer", "enable.auto.commit": False}
    )
    commits = 3000
    for i in range(commits):
        consumer.commit(offsets=[TopicPartition("plain", 0, i)], asynchronous=False)
    offsets_dir = broker.data_dir / "__consumer_offsets-0"
    written = commits * 60  # a commit record is well over 60 bytes: the uncompacted floor

    def bounded() -> bool:
        return sum(p.stat().st_size for p in _log_files(offsets_dir)) < 3 * 65536

    wait_for(bounded, 300, "__consumer_offsets to be compacted")
    assert sum(p.stat().st_size for p in _log_files(offsets_dir)) < written
    committed = consumer.committed([TopicPartition("plain", 0)], timeout=60)
    assert committed[0].offset == commits - 1
    consumer.close()
