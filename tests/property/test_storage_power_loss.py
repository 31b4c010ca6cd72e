"""A partition dir in the shapes a power loss leaves comes back as exactly the valid prefix of what was written.

A log of several segments (two leader epochs, an idempotent producer) is flushed part way (the recovery
point: what a power loss cannot take), written on, and then damaged past the flushed bytes the ways a
filesystem that lost unsynced data does: the files cut anywhere, a tail of zeros with the size kept
(ext4 delayed allocation), the file extended by zeros, garbage over the tail, one lost 4 KiB page in the
middle of the tail, the newest segment files gone (the active one with or without its indexes), the
indexes and time indexes pointing past the log or preallocated and full of zeros or garbage; beside
that the leader-epoch checkpoint and the producer snapshots are newer than the log, older than it,
zeroed or gone, and the recovery-point / log-start / high-watermark checkpoints point past the log end.

Opened with recovery, the log must hold exactly the whole batches before the first lost byte (every
flushed batch among them), byte for byte as written, offsets contiguous; its log end is the end of the
last one, nothing past it is served, the epoch cache and producer state agree with the surviving
batches, and it appends (and reopens) at its new end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkad.clock import ManualClock
from kafkad.protocol.errors import KafkaError
from kafkad.storage.leader_epoch import CHECKPOINT_FILE
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.producer_state import list_snapshots, snapshot_path
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

CONFIG = {"segment.bytes": "2500", "index.interval.bytes": "200"}
PID = 7
PAGE = 4096

TAIL_DAMAGE = ["none", "cut", "zero_tail", "zero_extend", "garbage", "lost_page", "lost_segments"]
INDEX_DAMAGE = ["keep", "zeros", "garbage", "empty", "gone"]
EPOCH_DAMAGE = ["keep", "older", "zeroed", "gone", "future"]
SNAPSHOT_DAMAGE = ["none", "newer", "older", "zeroed"]


class Written:
    """What was appended: per batch its offsets, epoch, producer sequence and the bytes as stored."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, int, int, bytes]] = []  # (base, last, epoch, last_seq, bytes)


def _write(
    log: PartitionLog, clock: ManualClock, sizes: list[tuple[int, int]], written: Written, epoch: int
) -> None:
    for count, value_size in sizes:
        seq = written.batches[-1][3] + 1 if written.batches else 0
        batch = make_batch(
            count,
            ts=clock.time_ms(),
            value_size=value_size,
            producer_id=PID,
            producer_epoch=0,
            base_sequence=seq,
            tag=len(written.batches),
        )
        result = log.append(memoryview(batch), leader_epoch=epoch, now_ms=clock.time_ms())
        stored = bytes(batch)  # stamped in place by the append
        written.batches.append((result.base_offset, result.last_offset, epoch, seq + count - 1, stored))
        clock.advance(1)


def _first_lost(old: bytes, new: bytes, next_base: int | None) -> int | None:
    """The base offset of the first batch of `old` that `new` does not hold whole and intact; when only
    bytes past its last batch changed, `next_base` (the later segments go: None if there are none)."""
    if new == old:
        return None
    first_bad = next(
        (i for i, (x, y) in enumerate(zip(old, new, strict=False)) if x != y), min(len(old), len(new))
    )
    pos = 0
    while pos < len(old):
        length = int.from_bytes(old[pos + 8 : pos + 12], "big")
        if pos + length + 12 > first_bad:
            return int.from_bytes(old[pos : pos + 8], "big")
        pos += length + 12
    return next_base


def _segments(directory: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in directory.glob("*.log"))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flushed=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 150)), min_size=1, max_size=25),
    unflushed=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 150)), min_size=1, max_size=40),
    tail=st.sampled_from(TAIL_DAMAGE),
    where=st.floats(0, 1),
    garbage=st.binary(min_size=1, max_size=600),
    index=st.sampled_from(INDEX_DAMAGE),
    epochs=st.sampled_from(EPOCH_DAMAGE),
    snapshot=st.sampled_from(SNAPSHOT_DAMAGE),
    checkpoints_past_end=st.booleans(),
)
def test_power_loss_shapes_recover_to_the_valid_prefix(
    tmp_path_factory: pytest.TempPathFactory,
    flushed: list[tuple[int, int]],
    unflushed: list[tuple[int, int]],
    tail: str,
    where: float,
    garbage: bytes,
    index: str,
    epochs: str,
    snapshot: str,
    checkpoints_past_end: bool,
) -> None:
    root = tmp_path_factory.mktemp("log")
    clock = ManualClock()
    log = open_log(root, clock, **CONFIG)
    d = log.directory
    written = Written()
    _write(log, clock, flushed, written, epoch=1)
    old_epochs = (d / CHECKPOINT_FILE).read_bytes()
    log.producer_state.take_snapshot(log.log_end_offset)  # older than the log after the writes below
    recovery_point = log.flush()
    log.leader_epoch_cache.flush()
    _write(log, clock, unflushed, written, epoch=2)
    if snapshot == "newer":
        log.producer_state.take_snapshot(log.log_end_offset)
    # The power loss: the process is gone (fds closed, nothing written at close).
    log.release()

    # Byte stream of every segment from the one holding the recovery point on (global positions).
    bases = _segments(d)
    files = [(b, (d / f"{b:020d}.log").read_bytes()) for b in bases]
    flushed_pos = {}  # per segment: bytes below the recovery point are on disk for sure
    for b, content in files:
        pos = 0
        while pos < len(content):
            base = int.from_bytes(content[pos : pos + 8], "big")
            length = int.from_bytes(content[pos + 8 : pos + 12], "big")
            last = base + int.from_bytes(content[pos + 23 : pos + 27], "big")
            if last >= recovery_point:
                break
            pos += length + 12
        flushed_pos[b] = pos
    damaged = [b for b in bases if flushed_pos[b] < len(dict(files)[b]) or b >= recovery_point]
    damaged = damaged or [bases[-1]]
    first_damaged: int | None = None  # the first offset whose batch is lost (None: nothing lost)
    if tail == "lost_segments":
        # The directory entries of the newest segments after the recovery point vanished; maybe one
        # index of the active segment survived.
        gone = [b for b in damaged if b > bases[0] and b >= recovery_point]
        gone = gone[int(len(gone) * where) :] if gone else []
        for b in gone:
            for suffix in (".log", ".timeindex") if index == "keep" else (".log", ".index", ".timeindex"):
                (d / f"{b:020d}{suffix}").unlink()
        if gone:
            first_damaged = gone[0]
    elif tail != "none":
        target = damaged[min(int(len(damaged) * where), len(damaged) - 1)]
        path = d / f"{target:020d}.log"
        old = path.read_bytes()
        buf = bytearray(old)
        lo = flushed_pos[target]
        at = lo + int((len(buf) - lo) * where)
        if tail == "cut":
            del buf[at:]
        elif tail == "zero_tail":
            buf[at:] = bytes(len(buf) - at)
        elif tail == "zero_extend":
            buf += bytes(len(garbage))
        elif tail == "garbage":
            # Stale blocks over the rest of the file (the fields before a batch's CRC-covered part,
            # offset and leader epoch, are only as safe as in Kafka: garbage there alone is not seen).
            buf[at:] = (garbage * (1 + (len(buf) - at) // len(garbage)))[: len(buf) - at]
        elif tail == "lost_page":
            # The page's fsynced part keeps what was synced: only the unsynced bytes of it are lost.
            page_end = at - at % PAGE + PAGE
            buf[max(at - at % PAGE, lo) : page_end] = bytes(len(buf[max(at - at % PAGE, lo) : page_end]))
        path.write_bytes(bytes(buf))
        first_damaged = _first_lost(old, bytes(buf), next((b for b in bases if b > target), None))
    # Indexes of every damaged segment: preallocated zeros, garbage, empty or gone.
    for b in damaged:
        for suffix in (".index", ".timeindex"):
            ix = d / f"{b:020d}{suffix}"
            if not ix.exists() or index == "keep":
                continue
            if index == "zeros":
                ix.write_bytes(bytes(1024))
            elif index == "garbage":
                ix.write_bytes(garbage * (1 + 1024 // len(garbage)))
            elif index == "empty":
                ix.write_bytes(b"")
            else:
                ix.unlink()
    # Leader epochs: the checkpoint as written (newer than the log if the tail is lost), as it was at the
    # flush (older), zeroed by a lost write, gone, or with an epoch the log never reached.
    ckpt = d / CHECKPOINT_FILE
    if epochs == "older":
        ckpt.write_bytes(old_epochs)
    elif epochs == "zeroed":
        ckpt.write_bytes(bytes(len(ckpt.read_bytes())))
    elif epochs == "gone":
        ckpt.unlink()
    elif epochs == "future":
        ckpt.write_text(ckpt.read_text().replace("\n2\n", "\n3\n") + "9 999999\n")
    if snapshot == "zeroed":
        for _, p in list_snapshots(d):
            p.write_bytes(bytes(p.stat().st_size))

    survivors = [w for w in written.batches if first_damaged is None or w[0] < first_damaged]
    assert all(w in survivors for w in written.batches if w[1] < recovery_point), "a flushed batch was lost"
    expected_leo = survivors[-1][1] + 1
    far = expected_leo + 10_000 if checkpoints_past_end else None
    reopened = PartitionLog.open(
        d,
        log.config,
        clock,
        recover=True,
        recovery_point=far or recovery_point,
        log_start_offset=0,
    )
    try:
        reopened.high_watermark = far or 0
        assert reopened.log_end_offset == expected_leo
        assert reopened.high_watermark <= expected_leo
        assert reopened.recovery_point <= expected_leo
        assert read_all(reopened) == b"".join(w[4] for w in survivors)  # whole, as written, contiguous
        with pytest.raises(KafkaError):
            reopened.read(expected_leo + 1, 1 << 20)
        assert not reopened.read(expected_leo, 1 << 20).slices  # nothing past the log end
        # Epoch cache: the first offset of each epoch among the survivors, nothing at or past the end.
        starts: dict[int, int] = {}
        for base, _, epoch, _, _ in survivors:
            starts.setdefault(epoch, base)
        assert reopened.leader_epoch_cache.entries == sorted(starts.items())
        # Producer state: the last surviving batch's sequence.
        assert reopened.producer_state.sequence_state(PID) == (0, survivors[-1][3])
        assert all(o <= expected_leo for o, _ in list_snapshots(d))
        assert not snapshot_path(d, expected_leo + 1).exists()
        # It appends at the new end: the next sequence, then a fresh one is refused as out of order.
        nxt = make_batch(
            2, ts=clock.time_ms(), producer_id=PID, producer_epoch=0, base_sequence=survivors[-1][3] + 1
        )
        assert (
            reopened.append(memoryview(nxt), leader_epoch=3, now_ms=clock.time_ms()).base_offset
            == expected_leo
        )
        assert reopened.leader_epoch_cache.entries[-1] == (3, expected_leo)
    finally:
        reopened.close()
    again = PartitionLog.open(d, log.config, clock, recover=False, recovery_point=expected_leo + 2)
    try:
        assert again.log_end_offset == expected_leo + 2
        assert again.stats.recovered_segments == 0
    finally:
        again.close()


def test_the_fixture_sees_real_files(tmp_path: Path) -> None:
    """The damage above is done to the files the log writes (names and layout)."""
    clock = ManualClock()
    log = open_log(tmp_path, clock, **CONFIG)
    written = Written()
    _write(log, clock, [(2, 100)] * 40, written, epoch=1)
    log.close()
    assert len(_segments(log.directory)) > 2
    assert (log.directory / CHECKPOINT_FILE).exists()
    assert list_snapshots(log.directory)
    assert os.path.getsize(log.directory / f"{0:020d}.index") >= 0
