"""A clean start after tail damage keeps exactly the whole batches before the damage (the marker is a hint).

The log is closed cleanly (its recovery point at the log end, as the LogManager leaves it before writing
the clean-shutdown marker), then its active segment's tail is damaged the ways a filesystem that kept
the marker but lost data does: bytes appended past the last batch, the file cut anywhere, or zeros from
some point to the end with the size kept. Opening without recovery must keep every batch that the
damage did not touch, drop the rest, and leave a log that appends at its new end.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkad.clock import ManualClock
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

CONFIG = {"segment.bytes": "3000", "index.interval.bytes": "200"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 120)), min_size=1, max_size=40),
    damage=st.sampled_from(["append", "cut", "zero"]),
    where=st.floats(0, 1),
    garbage=st.binary(min_size=1, max_size=300),
)
def test_clean_start_after_tail_damage_keeps_the_whole_batches_before_it(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[tuple[int, int]],
    damage: str,
    where: float,
    garbage: bytes,
) -> None:
    root = tmp_path_factory.mktemp("log")
    clock = ManualClock()
    log = open_log(root, clock, **CONFIG)
    for i, (count, value_size) in enumerate(sizes):
        batch = make_batch(count, ts=clock.time_ms(), value_size=value_size, tag=i)
        log.append(memoryview(batch), leader_epoch=1, now_ms=clock.time_ms())
        clock.advance(1)
    active = log.active_segment
    ends = []  # (end position, log end offset after that batch) of the active segment's batches
    pos = 0
    while pos < active.size:
        header = active.header_at(pos)
        pos += header.size
        ends.append((pos, header.last_offset + 1))
    before = read_all(log)
    leo = log.log_end_offset
    path = active.log_path
    log.close()
    data = bytearray(path.read_bytes())
    original = bytes(data)
    at = int(len(data) * where)
    if damage == "append":
        data += garbage
    elif damage == "cut":
        del data[at:]
    else:
        data[at:] = bytes(len(data) - at)
    path.write_bytes(bytes(data))
    # The whole batches the damage left byte for byte intact are kept.
    first_changed = next((i for i, (a, b) in enumerate(zip(data, original, strict=False)) if a != b), None)
    intact_until = min(len(data), len(original)) if first_changed is None else first_changed
    kept = [(end, off) for end, off in ends if end <= intact_until]
    expected_leo = kept[-1][1] if kept else active.base_offset
    reopened = PartitionLog.open(
        log.directory, log.config, clock, recover=False, recovery_point=leo, log_start_offset=0
    )
    try:
        assert reopened.log_end_offset == expected_leo
        assert reopened.active_segment.size == (kept[-1][0] if kept else 0)
        assert read_all(reopened) == before[: len(before) - (len(original) - reopened.active_segment.size)]
        result = reopened.append(memoryview(make_batch(2)), leader_epoch=2, now_ms=clock.time_ms())
        assert result.base_offset == expected_leo
    finally:
        reopened.close()
