"""A real broker started on a log dir a power loss damaged serves exactly the surviving prefix (issue 18 item 3).

Records are produced (idempotent, acks=all) into four partitions of small segments, the broker is killed
with SIGKILL (nothing was flushed: all of it is "unsynced"), and each partition's files are damaged in
one of the shapes a filesystem that lost unsynced data leaves:
  p0: the newest .log cut in the middle of a batch;
  p1: the newest .log's second half zeroed with its size kept (delayed allocation), its index garbage;
  p2: the newest .log gone while its indexes remain, the one before it extended by zeros;
  p3: a page of an older segment lost (a hole, later segments intact), the leader-epoch checkpoint and
      producer snapshots gone, and the recovery-point checkpoint claiming far more than the log holds.
The broker must start with no ERROR, serve every partition's records up to its first lost batch and
none after (log end = that batch's base offset), and take new records at that offset.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from kafkad.storage.leader_epoch import CHECKPOINT_FILE
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import CLIENTS, Got, Rec, create_topics, make_records, produce_confluent

pytestmark = pytest.mark.integration

PARTITIONS = 4
PAGE = 4096
PRODUCER: dict[str, str | int | bool] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 8192,
}


def _produce(bootstrap: str, recs: list[Rec], codec: str) -> None:
    produce_confluent(bootstrap, "pl", recs, {**PRODUCER, "compression.type": codec})


def _logs(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"), key=lambda p: int(p.name[:20]))


def _batches(data: bytes) -> list[tuple[int, int, int]]:
    """(position, end, base offset) of the whole batches in a .log's bytes."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + 12 + length > len(data):
            break
        out.append((pos, pos + 12 + length, int.from_bytes(data[pos : pos + 8], "big")))
        pos += 12 + length
    return out


def _first_lost(data: bytes, first_bad: int) -> int:
    """Base offset of the first batch not wholly before byte `first_bad` of a segment."""
    return next(base for pos, end, base in _batches(data) if end > first_bad)


def _damage(data_dir: Path) -> dict[int, int]:
    """Damage each partition (module docstring); returns partition -> offset of its first lost batch."""
    cut: dict[int, int] = {}
    # p0: the newest .log cut in the middle of a batch.
    newest = _logs(data_dir / "pl-0")[-1]
    data = newest.read_bytes()
    pos, end, _ = _batches(data)[len(_batches(data)) // 2]
    newest.write_bytes(data[: pos + (end - pos) // 2])
    cut[0] = _first_lost(data, pos + 1)
    # p1: zeros over the second half, size kept; the index is garbage.
    newest = _logs(data_dir / "pl-1")[-1]
    data = newest.read_bytes()
    half = len(data) // 2
    newest.write_bytes(data[:half] + bytes(len(data) - half))
    newest.with_suffix(".index").write_bytes(b"\x5a" * 1003)
    cut[1] = _first_lost(data, half)
    # p2: the newest .log gone (its indexes stay), the one before it zero-extended.
    logs = _logs(data_dir / "pl-2")
    assert len(logs) >= 3
    logs[-1].unlink()
    with logs[-2].open("ab") as f:
        f.write(bytes(3000))
    cut[2] = int(logs[-1].name[:20])
    # p3: one page of an older segment lost; epochs and producer snapshots gone; the recovery point lies.
    d3 = data_dir / "pl-3"
    logs = _logs(d3)
    assert len(logs) >= 3
    older = logs[1]
    data = older.read_bytes()
    page = (len(data) // 2) - (len(data) // 2) % PAGE
    older.write_bytes(data[:page] + bytes(PAGE) + data[page + PAGE :])
    cut[3] = _first_lost(data, page)
    (d3 / CHECKPOINT_FILE).unlink(missing_ok=True)
    for snap in d3.glob("*.snapshot"):
        snap.unlink()
    ckpt = data_dir / "recovery-point-offset-checkpoint"
    lines = ckpt.read_text().splitlines() if ckpt.exists() else ["0", "0"]
    entries = [ln for ln in lines[2:] if not ln.startswith("pl 3 ")]
    ckpt.write_text("\n".join(["0", str(len(entries) + 1), *entries, "pl 3 99999999"]) + "\n")
    return cut


def _by_partition(got: list[Got]) -> dict[int, list[Got]]:
    out: dict[int, list[Got]] = {p: [] for p in range(PARTITIONS)}
    for g in sorted(got, key=lambda g: (g.partition, g.offset)):
        out[g.partition].append(g)
    return out


def _end_offsets(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkad-test-unused"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition("pl", p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def test_a_broker_started_on_a_power_loss_damaged_dir_serves_the_surviving_prefix(tmp_path: Path) -> None:
    confluent = CLIENTS["confluent"]
    broker = BrokerProcess(tmp_path / "kafkad", {"log.segment.bytes": str(32 * 1024)})
    with broker:
        create_topics(broker.bootstrap, {"pl": PARTITIONS})
        ts = int(time.time() * 1000) - 1_000_000
        sent = make_records(8_000, PARTITIONS, ts)
        _produce(broker.bootstrap, sent, "none")
        before = _by_partition(confluent.consume(broker.bootstrap, "pl", PARTITIONS, len(sent)))
        broker.kill9()  # the page cache keeps everything: the damage below is the power loss
        cut = _damage(broker.data_dir)
        broker.start()
        text = broker.log_text()
        assert not re.search(r" (ERROR|CRITICAL) ", text) and "Traceback" not in text, text[-4000:]
        expected = {p: [g for g in before[p] if g.offset < cut[p]] for p in range(PARTITIONS)}
        assert all(expected[p] for p in range(PARTITIONS)) and all(cut[p] < len(before[p]) for p in cut)
        assert _end_offsets(broker.bootstrap) == cut  # nothing past the first lost batch
        got = _by_partition(
            confluent.consume(broker.bootstrap, "pl", PARTITIONS, sum(map(len, expected.values())))
        )
        for p in range(PARTITIONS):
            assert [(g.offset, g.key, g.value) for g in got[p]] == [
                (g.offset, g.key, g.value) for g in expected[p]
            ]
        # The log takes new records at its new end.
        more = make_records(400, PARTITIONS, ts + 10_000)
        _produce(broker.bootstrap, more, "lz4")
        after = _by_partition(
            confluent.consume(broker.bootstrap, "pl", PARTITIONS, sum(cut.values()) + len(more))
        )
        for p in range(PARTITIONS):
            assert [g.offset for g in after[p]] == list(range(cut[p] + 100)), f"partition {p}"
        assert " ERROR " not in broker.log_text()
