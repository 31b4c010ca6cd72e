"""Retention and the broker-wide disk budget through the LogManager, over real PartitionLogs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.disk_budget import DiskUsage
from kafkad.storage.log_manager_config import LogManagerConfig
from tests.unit.storage.log_manager_support import add_segments, bases, batch, make

HOUR = 3_600_000
DELAY = {"file.delete.delay.ms": "1000"}


def files(path: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.endswith(suffix))


def test_retention_by_time_whole_segments_then_files_after_delay(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock)
    plog = lm.create_partition("t", 0, {"retention.ms": str(HOUR), **DELAY})
    add_segments(plog, [now - 3 * HOUR, now - 2 * HOUR, now - HOUR // 2], now)
    assert bases(plog) == [0, 10, 20]
    assert lm.retention_pass(now) == 2
    assert bases(plog) == [20] and plog.log_start_offset == 20
    part = tmp_path / "d1" / "t-0"
    assert files(part, ".log.deleted") == [f"{0:020d}.log.deleted", f"{10:020d}.log.deleted"]
    clock.advance(999)
    assert lm.collect_deletions() == []
    clock.advance(1)
    assert lm.run_deletions(lm.collect_deletions()) == 2
    assert files(part, ".deleted") == []
    assert lm.retention_pass(clock.time_ms()) == 0


def test_retention_by_bytes_keeps_at_least_the_limit(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock)
    plog = lm.create_partition("b", 0)
    size = add_segments(plog, [now] * 4, now)
    lm.set_topic_overrides("b", {"retention.bytes": str(size * 5 // 2)})
    assert lm.retention_pass(now) == 1  # 4 segments -> 3 (3 >= 2.5); 2 would be too few
    assert bases(plog) == [10, 20, 30] and plog.size_bytes == 3 * size
    assert lm.retention_pass(now) == 0


def test_retention_stops_at_high_watermark_and_skips_compacted(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock)
    plog = lm.create_partition("t", 0, {"retention.ms": "1"})
    add_segments(plog, [now - HOUR, now - HOUR], now)
    plog.high_watermark = 10  # the second segment is not replicated yet
    assert lm.retention_pass(now) == 1 and bases(plog) == [10]
    compacted = lm.create_partition("c", 0, {"retention.ms": "1", "cleanup.policy": "compact"})
    add_segments(compacted, [now - HOUR, now - HOUR], now)
    assert lm.retention_pass(now) == 0


MB = 1 << 20


def test_budget_deletes_oldest_segments_across_partitions(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock)
    a = lm.create_partition("a", 0)  # d1
    b = lm.create_partition("b", 0)  # d2
    size = add_segments(a, [now - 5 * HOUR, now - 1 * HOUR, now], now)
    add_segments(b, [now - 4 * HOUR, now - 2 * HOUR, now], now)
    dirs = lm.config.log_dirs
    lm.config = LogManagerConfig(log_dirs=dirs, log_dirs_max_bytes=5 * size)
    plan = lm.budget_pass(now)  # 6 segments, room for 5
    assert [(c.topic, c.base_offset) for c in plan.deletions] == [("a", 0)]
    assert bases(a) == [10, 20] and a.log_start_offset == 10
    lm.check_writable()
    lm.config = LogManagerConfig(log_dirs=dirs, log_dirs_max_bytes=2 * size)
    plan = lm.budget_pass(now)  # b-0 (4 h old), b-10 (2 h), a-10 (1 h)
    assert [(c.topic, c.base_offset) for c in plan.deletions] == [("b", 0), ("b", 10), ("a", 10)]
    assert plan.shortfall_bytes == 0 and bases(a) == [20] and bases(b) == [20]
    clock.advance(60_000)
    assert lm.run_deletions(lm.collect_deletions()) == 4


def test_budget_prefers_shipped_segments_and_warns_on_unshipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    shipped = {("b", 0, 0)}
    lm = make(tmp_path, clock, is_shipped=lambda t, p, o: (t, p, o) in shipped)
    a = lm.create_partition("a", 0)
    b = lm.create_partition("b", 0)
    size = add_segments(a, [now - 9 * HOUR, now - 8 * HOUR], now)  # oldest, but not shipped
    add_segments(b, [now - 1 * HOUR, now], now)
    dirs = lm.config.log_dirs
    lm.config = LogManagerConfig(log_dirs=dirs, log_dirs_max_bytes=3 * size)
    plan = lm.budget_pass(now)
    assert [(c.topic, c.base_offset) for c in plan.deletions] == [("b", 0)]
    assert "NOT shipped" not in caplog.text
    # Still over: with nothing shipped left, the oldest unshipped one goes, loudly.
    lm.config = LogManagerConfig(log_dirs=dirs, log_dirs_max_bytes=2 * size)
    plan = lm.budget_pass(now)
    assert [(c.topic, c.base_offset) for c in plan.unshipped] == [("a", 0)]
    assert bases(a) == [10]
    assert any(r.levelname == "WARNING" and "a-0 base offset 0" in r.getMessage() for r in caplog.records)


def test_budget_blocks_writes_when_nothing_is_left_and_unblocks(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    free = {"bytes": 50 * MB}

    def probe(path: str) -> DiskUsage:
        return DiskUsage(device=1, total_bytes=100 * MB, free_bytes=free["bytes"])

    lm = make(tmp_path, clock, log_dirs_min_free_percent=10.0, usage_probe=probe)
    a = lm.create_partition("a", 0, {"file.delete.delay.ms": "0"})
    add_segments(a, [now - HOUR], now)
    a.append(batch(), leader_epoch=0, now_ms=now)  # the active segment: never deletable
    free["bytes"] = 5 * MB  # something else filled the disk
    plan = lm.budget_pass(now)  # needs 10 MB free, has 5: deleting one small segment is not enough
    assert [c.base_offset for c in plan.deletions] == [0]
    assert plan.shortfall_bytes > 4 * MB
    for call in (lm.check_writable, lambda: lm.append("a", 0, batch(), leader_epoch=0, now_ms=now)):
        with pytest.raises(KafkaError) as e:
            call()
        assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert a.log_end_offset == 11  # nothing was appended
    assert a.read(10, 1 << 20).size > 0  # reads keep working
    lm.run_deletions(lm.collect_deletions())
    assert lm.budget_pass(now).shortfall_bytes > 0 and lm.budget.writes_blocked
    free["bytes"] = 11 * MB  # space came back (e.g. an operator removed other files)
    assert lm.budget_pass(now).shortfall_bytes == 0
    lm.check_writable()
    assert lm.append("a", 0, batch(), leader_epoch=0, now_ms=now).base_offset == 11
    with pytest.raises(KafkaError) as e:
        lm.append("nope", 0, batch(), leader_epoch=0, now_ms=now)
    assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_budget_counts_files_waiting_for_deletion_as_freed(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    usage = {"total": 1 << 40, "free": 1 << 40}  # room for the setup appends
    lm = make(
        tmp_path,
        clock,
        log_dirs_min_free_percent=10.0,
        usage_probe=lambda path: DiskUsage(1, usage["total"], usage["free"]),
    )
    a = lm.create_partition("a", 0)
    size = add_segments(a, [now - 5 * HOUR, now - 4 * HOUR, now - 3 * HOUR, now - 2 * HOUR], now)
    usage["total"] = 1000 * size
    usage["free"] = 100 * size - size - size // 2  # 1.5 segments short of 10 % free
    assert [c.base_offset for c in lm.budget_pass(now).deletions] == [0, 10]
    # The probe still sees the same free space (files wait file.delete.delay.ms): nothing more goes.
    assert lm.budget_pass(now).deletions == ()
    assert bases(a) == [20, 30] and not lm.budget.writes_blocked
    clock.advance(60_000)
    lm.run_deletions(lm.collect_deletions())
    # Deleted for real now, but the probe (a stand-in) did not notice: the budget acts again.
    assert [c.base_offset for c in lm.budget_pass(clock.time_ms()).deletions] == [20, 30]


def test_budget_off_by_default(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock, usage_probe=lambda path: DiskUsage(1, 100, 0))
    add_segments(lm.create_partition("a", 0), [0, 0], now)
    assert lm.budget_pass(now).deletions == ()
    lm.check_writable()
