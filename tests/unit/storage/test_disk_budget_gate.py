"""The disk budget on the append path (WriteGate): writes stop within one request of the limit.

No budget pass runs between the appends here (the periodic pass alone let a fast producer run the disk
full): the gate counts the bytes appended since its last statvfs and measures again only when they
could have used up the headroom, so the probe is asked rarely far from the limit and the write that
would cross it is refused with the budget's KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.disk_budget import BudgetState, DiskUsage, WriteGate, headroom_of
from kafkad.storage.log_types import AppendOrigin
from tests.unit.storage.log_manager_support import add_segments, batch, make

MB = 1 << 20
TOTAL = 100 * MB
THRESHOLD = 10 * MB  # log.dirs.min.free.percent=10


def test_gate_measures_only_when_the_charges_could_cross() -> None:
    calls = []
    headroom = {"bytes": 10_000}

    def measure() -> int:
        calls.append(headroom["bytes"])
        return headroom["bytes"]

    state = BudgetState()
    gate = WriteGate(measure, state)
    gate.charge(1000, AppendOrigin.CLIENT)  # the first append measures
    for _ in range(9):
        gate.charge(1000, AppendOrigin.CLIENT)
    assert len(calls) == 1  # 10 x 1000 bytes fit the 10,000 measured
    headroom["bytes"] = 500  # the disk is nearly at the limit now
    with pytest.raises(KafkaError) as e:
        gate.charge(1000, AppendOrigin.CLIENT)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR and "disk budget" in e.value.message
    assert state.reserve_bytes == 500  # the pass must free what the refused write lacked
    gate.charge(400, AppendOrigin.CLIENT)  # a smaller write still fits
    gate.charge(1000, AppendOrigin.REPLICATION)  # a follower's copy is counted, never refused
    gate.charge(1000, AppendOrigin.COORDINATOR)
    assert gate.remaining < 0


def test_headroom_is_the_tighter_limit() -> None:
    usage = {"/d1": DiskUsage(1, TOTAL, 15 * MB), "/d2": DiskUsage(2, TOTAL, 12 * MB)}
    assert headroom_of(usage_by_dir=usage, used_bytes=0, max_bytes=-1, min_free_percent=10) == 2 * MB
    assert headroom_of(usage_by_dir=usage, used_bytes=9 * MB, max_bytes=10 * MB, min_free_percent=10) == MB
    assert headroom_of(usage_by_dir={}, used_bytes=9 * MB, max_bytes=-1, min_free_percent=0) > 0


@pytest.mark.parametrize("limit", ["min_free", "max_bytes"])
def test_appends_stop_within_one_request_of_the_limit_without_a_pass(tmp_path: Path, limit: str) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    probes = []
    start_free = THRESHOLD + 200_000

    def probe(path: str) -> DiskUsage:  # a filesystem that only the logs write to
        probes.append(path)
        used = sum(p.size_bytes for _, p in lm.partition_logs())
        return DiskUsage(1, TOTAL, start_free - used)

    if limit == "min_free":
        lm = make(tmp_path, clock, log_dirs_min_free_percent=10.0, usage_probe=probe)
    else:
        lm = make(tmp_path, clock, log_dirs_max_bytes=200_000, usage_probe=probe)
    a = lm.create_partition("a", 0)
    b = lm.create_partition("b", 0)
    one = len(batch())
    accepted = 0
    with pytest.raises(KafkaError) as e:
        for i in range(10_000):  # bounded: 200 kB of headroom is ~170 batches
            lm.append("ab"[i % 2], 0, batch(), leader_epoch=0, now_ms=now)
            accepted += 1
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR and "disk budget" in e.value.message
    written = a.size_bytes + b.size_bytes
    assert written == accepted * one
    assert 200_000 - one < written <= 200_000  # stopped within one request of the limit, never past it
    if limit == "min_free":
        assert len(probes) < accepted  # far from the limit an append costs no statvfs
    # A follower's append goes through (replication is never refused by the budget).
    follower = lm.create_partition("c", 0)
    follower.append(batch(), leader_epoch=0, now_ms=now, origin=AppendOrigin.REPLICATION)
    assert follower.log_end_offset == 1
    # The pass now reserves room for the refused write: nothing to delete, so writes are blocked.
    plan = lm.budget_pass(now)
    assert plan.shortfall_bytes > 0 and lm.budget.writes_blocked


def test_the_pass_frees_room_for_a_refused_write(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    free = {"bytes": 100 * MB}
    lm = make(
        tmp_path,
        clock,
        log_dirs_min_free_percent=10.0,
        usage_probe=lambda path: DiskUsage(1, TOTAL, free["bytes"]),
    )
    a = lm.create_partition("a", 0, {"file.delete.delay.ms": "0"})
    size = add_segments(a, [now - 3_600_000], now)
    free["bytes"] = THRESHOLD + 10  # 10 bytes left: the next write is refused, nothing is over yet
    lm.budget_pass(now)
    with pytest.raises(KafkaError):
        lm.append("a", 0, batch(), leader_epoch=0, now_ms=now)
    assert lm.budget.reserve_bytes > 0
    plan = lm.budget_pass(now)  # deletes the old segment to make room for the refused write
    assert [c.base_offset for c in plan.deletions] == [0] and plan.shortfall_bytes == 0
    assert not lm.budget.writes_blocked and lm.budget.reserve_bytes == 0
    free["bytes"] += size  # the deleted segment's space came back
    lm.append("a", 0, batch(), leader_epoch=0, now_ms=now)
