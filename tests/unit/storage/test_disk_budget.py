from __future__ import annotations

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.disk_budget import (
    BudgetPlan,
    BudgetState,
    DiskUsage,
    SegmentCandidate,
    plan_budget,
    statvfs_usage,
)

MB = 1 << 20


def seg(topic: str, p: int, base: int, ts: int, size: int = MB, log_dir: str = "/d1") -> SegmentCandidate:
    return SegmentCandidate(log_dir, topic, p, base, size, ts)


def test_under_budget_deletes_nothing() -> None:
    plan = plan_budget(
        used_bytes_by_dir={"/d1": 5 * MB},
        usage_by_dir={"/d1": DiskUsage(1, 100 * MB, 50 * MB)},
        max_bytes=10 * MB,
        min_free_percent=10,
        candidates=[seg("a", 0, 0, 1)],
    )
    assert plan.deletions == () and plan.shortfall_bytes == 0


def test_oldest_across_partitions_and_prefix_order() -> None:
    cands = [
        seg("a", 0, 0, 100),
        seg("a", 0, 10, 400),
        seg("b", 0, 0, 200),
        seg("b", 0, 5, 300),
        # c-0's second segment is old by timestamp but its older sibling is newer: prefix wins.
        seg("c", 0, 0, 500),
        seg("c", 0, 7, 50),
    ]
    plan = plan_budget(
        used_bytes_by_dir={"/d1": 10 * MB},
        usage_by_dir={},
        max_bytes=7 * MB,
        min_free_percent=0,
        candidates=cands,
    )
    assert [(c.topic, c.base_offset) for c in plan.deletions] == [("a", 0), ("b", 0), ("b", 5)]
    assert plan.shortfall_bytes == 0
    assert plan.delete_before() == {("a", 0): 0, ("b", 0): 5}


def test_prefers_shipped_then_last_resort_unshipped() -> None:
    cands = [seg("a", 0, 0, 100), seg("a", 0, 10, 150), seg("b", 0, 0, 300)]
    unshipped = {("a", 0, 0)}

    def plan(max_bytes: int) -> BudgetPlan:
        return plan_budget(
            used_bytes_by_dir={"/d1": 10 * MB},
            usage_by_dir={},
            max_bytes=max_bytes,
            min_free_percent=0,
            candidates=cands,
            is_shipped=lambda t, p, b: (t, p, b) not in unshipped,
        )

    got = plan(9 * MB)
    assert [(c.topic, c.base_offset) for c in got.deletions] == [("b", 0)]
    assert got.unshipped == ()
    got = plan(8 * MB)
    assert [(c.topic, c.base_offset) for c in got.deletions] == [("b", 0), ("a", 0)]
    assert [(c.topic, c.base_offset) for c in got.unshipped] == [("a", 0)]


def test_min_free_percent_per_filesystem_and_shortfall() -> None:
    cands = [
        seg("a", 0, 0, 100, log_dir="/d1"),
        seg("b", 0, 0, 50, log_dir="/d2"),
        seg("b", 0, 1, 60, log_dir="/d2"),
    ]
    plan = plan_budget(
        used_bytes_by_dir={"/d1": 3 * MB, "/d2": 2 * MB},
        # /d1's filesystem has room; /d2's needs 10% of 100 MB free and has 8.5 MB.
        usage_by_dir={
            "/d1": DiskUsage(1, 100 * MB, 50 * MB),
            "/d2": DiskUsage(2, 100 * MB, 8 * MB + MB // 2),
        },
        max_bytes=-1,
        min_free_percent=10,
        candidates=cands,
    )
    assert [(c.topic, c.base_offset) for c in plan.deletions] == [("b", 0), ("b", 1)]
    assert plan.shortfall_bytes == 0
    plan = plan_budget(
        used_bytes_by_dir={"/d2": 2 * MB},
        usage_by_dir={"/d2": DiskUsage(2, 100 * MB, 5 * MB)},
        max_bytes=-1,
        min_free_percent=10,
        candidates=cands[1:],
    )
    assert len(plan.deletions) == 2 and plan.shortfall_bytes == 3 * MB


def test_dirs_on_one_filesystem_share_the_need() -> None:
    cands = [seg("a", 0, 0, 100, log_dir="/d1"), seg("b", 0, 0, 200, log_dir="/d2")]
    plan = plan_budget(
        used_bytes_by_dir={"/d1": MB, "/d2": MB},
        usage_by_dir={"/d1": DiskUsage(7, 100 * MB, 9 * MB), "/d2": DiskUsage(7, 100 * MB, 9 * MB)},
        max_bytes=-1,
        min_free_percent=10,
        candidates=cands,
    )
    assert [c.topic for c in plan.deletions] == ["a"]


def test_budget_state_blocks_and_unblocks() -> None:
    state = BudgetState()
    state.check_writable()
    state.block("log.dirs.max.bytes exceeded by 5 bytes")
    with pytest.raises(KafkaError) as e:
        state.check_writable()
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR and "5 bytes" in str(e.value)
    state.unblock()
    state.check_writable()


def test_statvfs_probe(tmp_path: object) -> None:
    u = statvfs_usage(str(tmp_path))
    assert u.total_bytes > 0 and 0 <= u.free_bytes <= u.total_bytes
