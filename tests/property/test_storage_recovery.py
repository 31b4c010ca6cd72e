"""Crash recovery keeps exactly the valid prefix: random truncation and byte flips in the last segment."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkad.clock import ManualClock
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

CONFIG = {"segment.bytes": "3000", "index.interval.bytes": "200"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 120)), min_size=1, max_size=60),
    cut=st.floats(0, 1),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), max_size=3),
    truncate=st.booleans(),
    full_recovery=st.booleans(),
)
def test_reopen_after_damage_keeps_exactly_the_valid_prefix(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[tuple[int, int]],
    cut: float,
    flips: list[tuple[float, int]],
    truncate: bool,
    full_recovery: bool,
) -> None:
    root = tmp_path_factory.mktemp("log")
    clock = ManualClock()
    log = open_log(root, clock, **CONFIG)
    stored: list[tuple[int, bytes]] = []  # (offset, bytes as stored)
    for i, (count, value_size) in enumerate(sizes):
        batch = make_batch(count, ts=clock.time_ms(), value_size=value_size, tag=i)
        result = log.append(memoryview(batch), leader_epoch=1, now_ms=clock.time_ms())
        stored.append((result.base_offset, bytes(batch)))
        clock.advance(1)
    active = log.active_segment
    recovery_point = active.base_offset
    in_active = [(o, b) for o, b in stored if o >= active.base_offset]
    path = active.log_path
    data = bytearray(path.read_bytes())
    assert data == b"".join(b for _, b in in_active)
    # Damage: maybe truncate, then flip bytes inside the CRC-protected part of some batches.
    valid_end = len(data)
    if truncate:
        valid_end = int(len(data) * cut)
        del data[valid_end:]
    starts = []
    pos = 0
    for _, b in in_active:
        starts.append((pos, len(b)))
        pos += len(b)
    xors: dict[int, int] = {}
    for where, xor in flips:
        if not data:
            break
        p = min(int(len(data) * where), len(data) - 1)
        start = next(s for s, n in starts if s <= p < s + n)
        p = max(p, start + 16)  # bytes 0..15 (offset, length, epoch) are outside the CRC by design
        if p < len(data):
            xors[p] = xors.get(p, 0) ^ xor
    for p, xor in xors.items():
        if xor:  # two flips of one byte may cancel out
            data[p] ^= xor
            valid_end = min(valid_end, next(s for s, n in starts if s <= p < s + n))
    path.write_bytes(bytes(data))
    # Expected: the whole batches that end before the first damage.
    kept = [(o, b) for (o, b), (s, n) in zip(in_active, starts, strict=True) if s + n <= valid_end]
    expected_leo = kept[-1][0] + _count(kept[-1][1]) if kept else active.base_offset
    reopened = PartitionLog.open(
        log.directory, log.config, clock, recover=True, recovery_point=0 if full_recovery else recovery_point
    )
    try:
        assert reopened.log_end_offset == expected_leo
        prefix = [(o, b) for o, b in stored if o < active.base_offset] + kept
        expected = b"".join(_stamp(b, o) for o, b in prefix)
        assert read_all(reopened) == expected  # never a corrupt byte
        assert reopened.active_segment.size == sum(len(b) for _, b in kept)
        # the log keeps working where the valid prefix ended
        result = reopened.append(memoryview(make_batch(2)), leader_epoch=2, now_ms=clock.time_ms())
        assert result.base_offset == expected_leo
    finally:
        reopened.close()
        for seg in log.segments:
            seg.close()


def _count(batch: bytes) -> int:
    return int.from_bytes(batch[57:61], "big")


def _stamp(batch: bytes, offset: int) -> bytes:
    return offset.to_bytes(8, "big") + batch[8:12] + (1).to_bytes(4, "big") + batch[16:]
