"""A standalone kafkad on LazyFS (tests/chaos/lazyfs.py): 20,000 records acknowledged with acks=1, the power
cut right after the last answer (kill -9, unsynced data dropped, remount, start), then everything read back.

- Kafka's defaults (no fsync before an answer): the power loss must take records away (the proof that the
  file system drops what was not fsynced under a real broker, mmap'd indexes included), and the broker must
  still start and serve only what it was acknowledged for, at the offsets it acknowledged (no corrupt or
  shifted record);
- `log.flush.interval.messages=1` (fsync before the answer, issue 18 items 1-2): all 20,000 come back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from tests.chaos.lazyfs import LazyMount, summary
from tests.integration.broker_process import BrokerProcess

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

TOPIC = "powerloss"
PARTITIONS = 3
N = 20_000


def produce_acked(bootstrap: str, n: int) -> dict[str, tuple[int, int]]:
    """n records with acks=1; value -> (partition, offset) of every acknowledged one (all must be)."""
    acked: dict[str, tuple[int, int]] = {}
    errors: list[str] = []

    def done(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err.name())
        else:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "log_level": 0})
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, f"rec-{i:06d}".encode(), partition=i % PARTITIONS, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(120) == 0, "records still unanswered"
    assert not errors and len(acked) == n, (errors[:5], len(acked))
    return acked


def read_all(bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS) -> dict[str, tuple[int, int]]:
    """Every record of every partition, from the beginning to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "powerloss-read", "enable.auto.commit": False,
                  "log_level": 0})  # fmt: skip
    got: dict[str, tuple[int, int]] = {}
    try:
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)
        }
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        pos = {p: -1 for p in range(partitions)}
        for _ in range(2000):
            if all(pos[p] + 1 >= ends[p] for p in ends):
                break
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    got[m.value().decode()] = (m.partition(), m.offset())
                    pos[m.partition()] = max(pos[m.partition()], m.offset())
        else:
            raise AssertionError(f"read stuck at {pos} of {ends}")
    finally:
        c.close()
    return got


@pytest.fixture
def broker_on_lazyfs(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[BrokerProcess, LazyMount]]:
    fs = LazyMount(tmp_path / "backing", tmp_path / "mnt")
    fs.mount()
    b = BrokerProcess(tmp_path / "broker", {"num.partitions": str(PARTITIONS), **request.param})
    b.data_dir = fs.mountpoint / "data"
    try:
        b.start()
        yield b, fs
    finally:
        b.kill9()
        fs.unmount()


DEFAULTS: dict[str, str] = {}
FLUSH_EACH = {"log.flush.interval.messages": "1"}


def power_cut(b: BrokerProcess, fs: LazyMount) -> dict[str, Any]:
    b.kill9()
    report = fs.power_loss()
    fs.remount()
    b.start()
    return report


@pytest.mark.parametrize("broker_on_lazyfs", [DEFAULTS], indirect=True, ids=["defaults"])
def test_power_loss_with_defaults_loses_the_unsynced_tail_and_serves_no_corrupt_record(
    broker_on_lazyfs: tuple[BrokerProcess, LazyMount],
) -> None:
    b, fs = broker_on_lazyfs
    from tests.chaos.workload import create_topic

    create_topic(b.bootstrap, TOPIC, PARTITIONS, 1)
    acked = produce_acked(b.bootstrap, N)
    assert read_all(b.bootstrap) == acked  # the broker works on LazyFS: offset index (mmap) and reads
    report = power_cut(b, fs)
    assert report["bytes_dropped"] > 0, report
    got = read_all(b.bootstrap) if TOPIC in _topics(b.bootstrap) else {}
    lost = set(acked) - set(got)
    assert lost, f"the power loss took nothing away: {report}"
    served_wrong = {v: (got[v], acked.get(v)) for v in got if acked.get(v) != got[v]}
    assert not served_wrong, (
        f"records served at offsets they were not acknowledged at: {list(served_wrong.items())[:5]}"
    )
    # the broker is usable after it: the next records land after what survived
    more = produce_acked(b.bootstrap, 300)
    assert {pos[0] for pos in more.values()} == set(range(PARTITIONS))
    print(f"defaults: {len(lost)} of {N} acknowledged records lost; file system: {summary(report)}")
    assert_clean_log(b)


@pytest.mark.parametrize("broker_on_lazyfs", [FLUSH_EACH], indirect=True, ids=["flush-messages-1"])
def test_power_loss_with_flush_messages_1_keeps_every_acknowledged_record(
    broker_on_lazyfs: tuple[BrokerProcess, LazyMount],
) -> None:
    b, fs = broker_on_lazyfs
    from tests.chaos.workload import create_topic

    create_topic(b.bootstrap, TOPIC, PARTITIONS, 1)
    acked = produce_acked(b.bootstrap, N)
    power_cut(b, fs)
    got = read_all(b.bootstrap) if TOPIC in _topics(b.bootstrap) else {}
    lost = sorted(set(acked) - set(got))
    print(
        f"flush.messages=1: {len(lost)} of {N} acknowledged records lost; file system: {[summary(r) for r in fs.power_losses]}"
    )
    assert not lost, f"{len(lost)} of {N} acknowledged records lost, e.g. {lost[:5]}"
    assert got == acked
    assert_clean_log(b)


def assert_clean_log(b: BrokerProcess) -> None:
    bad = [ln for ln in b.log_text(since_start=False).splitlines() if " ERROR " in ln or "Traceback" in ln]
    assert not bad, "\n".join(bad[:20])


def _topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return set(md.topics)
