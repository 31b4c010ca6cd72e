from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.disk_budget import DiskUsage
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_manager import LogManager
from kafkad.storage.log_manager_config import LogManagerConfig
from tests.unit.storage.fake_log import FakeLog, FakeOpener

HOUR = 3_600_000


def make(tmp_path: Path, clock: ManualClock, **kwargs: object) -> LogManager:
    probe = kwargs.pop("probe", None)
    shipped = kwargs.pop("shipped", None)
    config = LogManagerConfig(log_dirs=(str(tmp_path / "d1"), str(tmp_path / "d2")), **kwargs)  # type: ignore[arg-type]
    extra: dict[str, object] = {}
    if probe is not None:
        extra["usage_probe"] = probe
    if shipped is not None:
        extra["is_shipped"] = shipped
    lm = LogManager(config, LogConfig(), clock, opener=FakeOpener(), **extra)  # type: ignore[arg-type]
    lm.load()
    return lm


def segs(lm: LogManager, topic: str, p: int = 0) -> list[int]:
    plog = lm.get(topic, p)
    assert plog is not None
    return [s.base_offset for s in plog.closed_segments()]


def test_retention_by_time_whole_segments_never_active(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock)
    plog = cast(
        FakeLog, lm.create_partition("t", 0, {"retention.ms": str(HOUR), "file.delete.delay.ms": "1000"})
    )
    plog.add_segment(100, now - 3 * HOUR)  # offsets 0..9
    plog.add_segment(100, now - 2 * HOUR)  # 10..19
    plog.add_segment(100, now - HOUR // 2)  # 20..29, young
    plog.disk.segments[-1].max_timestamp_ms = now - 10 * HOUR  # the active segment is never deleted
    assert lm.retention_pass(now) == 2
    assert segs(lm, "t") == [20] and plog.log_start_offset == 20
    assert (plog.path / f"{0:020d}.log").exists()  # files wait for file.delete.delay.ms
    assert lm.delete_pending(now + 999) == 0
    assert lm.delete_pending(now + 1000) == 1
    assert plog.deleted == [0, 10] and not (plog.path / f"{0:020d}.log").exists()
    assert lm.retention_pass(now) == 0


def test_retention_by_bytes_keeps_at_least_the_limit(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = make(tmp_path, clock)
    plog = cast(FakeLog, lm.create_partition("b", 0, {"retention.bytes": "250"}))
    for _ in range(4):
        plog.add_segment(100, clock.time_ms())
    plog.disk.segments[-1].size_bytes = 20  # active segment counts towards the size
    # 420 bytes, limit 250: only whole segments that keep the log >= 250 bytes go (420 -> 320).
    assert lm.retention_pass(clock.time_ms()) == 1
    assert segs(lm, "b") == [10, 20, 30] and plog.size_bytes() == 320
    assert lm.retention_pass(clock.time_ms()) == 0  # excess 70 < next segment's 100


def test_retention_stops_at_high_watermark_and_respects_compact(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock)
    plog = cast(FakeLog, lm.create_partition("t", 0, {"retention.ms": "1"}))
    plog.add_segment(100, now - HOUR)
    plog.add_segment(100, now - HOUR)
    plog.set_offsets(recovery_point=0, log_start=0, hw=10)  # second segment not yet replicated
    assert lm.retention_pass(now) == 1 and segs(lm, "t") == [10]
    compacted = cast(FakeLog, lm.create_partition("c", 0, {"retention.ms": "1", "cleanup.policy": "compact"}))
    compacted.add_segment(100, now - HOUR)
    compacted.add_segment(100, now - HOUR)
    assert lm.retention_pass(now) == 0


def test_segments_below_log_start_offset_are_removed(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = make(tmp_path, clock)
    plog = cast(FakeLog, lm.create_partition("t", 0))
    for _ in range(3):
        plog.add_segment(100, clock.time_ms())
    plog.set_offsets(recovery_point=0, log_start=15, hw=30)  # DeleteRecords moved the start
    assert lm.retention_pass(clock.time_ms()) == 1 and segs(lm, "t") == [10, 20]


MB = 1 << 20


def test_budget_deletes_oldest_across_partitions(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock, log_dirs_max_bytes=5 * MB)
    a = cast(FakeLog, lm.create_partition("a", 0))  # d1
    b = cast(FakeLog, lm.create_partition("b", 0))  # d2
    a.add_segment(MB, now - 5 * HOUR)
    a.add_segment(MB, now - 1 * HOUR)
    a.add_segment(MB, now)
    b.add_segment(MB, now - 4 * HOUR)
    b.add_segment(MB, now - 2 * HOUR)
    b.add_segment(MB, now)
    plan = lm.budget_pass(now)  # 6 MB used, cap 5 MB
    assert [(c.topic, c.base_offset) for c in plan.deletions] == [("a", 0)]
    assert segs(lm, "a") == [10, 20] and a.log_start_offset == 10
    lm.check_writable()
    lm.config = LogManagerConfig(log_dirs=lm.config.log_dirs, log_dirs_max_bytes=2 * MB)
    plan = lm.budget_pass(now)  # 5 MB used: b-0 (4h), b-10 (2h), a-10 (1h)
    assert [(c.topic, c.base_offset) for c in plan.deletions] == [("b", 0), ("b", 10), ("a", 10)]
    assert plan.shortfall_bytes == 0
    clock.advance(LogConfig().file_delete_delay_ms)
    lm.delete_pending(clock.time_ms())
    assert a.deleted == [0, 10] and b.deleted == [0, 10]


def test_budget_prefers_shipped_segments_and_warns_on_unshipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    shipped: set[tuple[str, int, int]] = {("b", 0, 0)}
    lm = make(tmp_path, clock, log_dirs_max_bytes=3 * MB, shipped=lambda t, p, o: (t, p, o) in shipped)
    a = cast(FakeLog, lm.create_partition("a", 0))
    b = cast(FakeLog, lm.create_partition("b", 0))
    a.add_segment(MB, now - 9 * HOUR)  # oldest, but not shipped
    a.add_segment(MB, now - 8 * HOUR)
    b.add_segment(MB, now - 1 * HOUR)
    b.add_segment(MB, now)
    plan = lm.budget_pass(now)
    assert [(c.topic, c.base_offset) for c in plan.deletions] == [("b", 0)]
    assert "NOT shipped" not in caplog.text
    # Still over: with nothing shipped left, the oldest unshipped one goes, loudly.
    lm.config = LogManagerConfig(log_dirs=lm.config.log_dirs, log_dirs_max_bytes=2 * MB)
    plan = lm.budget_pass(now)
    assert [(c.topic, c.base_offset) for c in plan.unshipped] == [("a", 0)]
    assert "a-0 base offset 0" in caplog.text and "NOT shipped" in caplog.text
    assert any(r.levelname == "WARNING" for r in caplog.records)


def test_budget_blocks_writes_when_nothing_is_left_and_unblocks(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    free = {"bytes": 5 * MB}

    def probe(path: str) -> DiskUsage:
        return DiskUsage(device=1, total_bytes=100 * MB, free_bytes=free["bytes"])

    lm = make(tmp_path, clock, log_dirs_min_free_percent=10.0, probe=probe)
    a = cast(FakeLog, lm.create_partition("a", 0, {"file.delete.delay.ms": "0"}))
    a.add_segment(2 * MB, now - HOUR)
    a.disk.segments[-1].size_bytes = 3 * MB  # the active segment: never deletable
    plan = lm.budget_pass(now)  # needs 10 MB free, has 5: deleting 2 MB is not enough
    assert [c.base_offset for c in plan.deletions] == [0]
    assert plan.shortfall_bytes == 3 * MB
    with pytest.raises(KafkaError) as e:
        lm.check_writable()
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaError) as e:
        lm.append("a", 0, memoryview(b"x"), leader_epoch=0, now_ms=now)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR and a.appends == 0
    assert lm.get("a", 0) is a  # reads go straight to the log: never gated
    lm.delete_pending(now)
    free["bytes"] = 7 * MB  # the 2 MB came back, still short
    assert lm.budget_pass(now).shortfall_bytes == 3 * MB
    assert lm.budget.writes_blocked
    free["bytes"] = 11 * MB  # e.g. an operator removed other files
    assert lm.budget_pass(now).shortfall_bytes == 0
    lm.check_writable()
    assert lm.append("a", 0, memoryview(b"x"), leader_epoch=0, now_ms=now) == 1
    with pytest.raises(KafkaError) as e:
        lm.append("nope", 0, memoryview(b"x"))
    assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_budget_counts_files_waiting_for_deletion_as_freed(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(
        tmp_path,
        clock,
        log_dirs_min_free_percent=10.0,
        probe=lambda path: DiskUsage(device=1, total_bytes=100 * MB, free_bytes=7 * MB),
    )
    a = cast(FakeLog, lm.create_partition("a", 0))
    for age in (5, 4, 3, 2):
        a.add_segment(2 * MB, now - age * HOUR)
    assert [c.base_offset for c in lm.budget_pass(now).deletions] == [0, 10]  # 3 MB short: two segments
    # The probe still sees 7 MB free (files wait file.delete.delay.ms), but nothing more is deleted.
    assert lm.budget_pass(now).deletions == ()
    assert segs(lm, "a") == [20, 30] and not lm.budget.writes_blocked


def test_budget_off_by_default(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = make(tmp_path, clock, probe=lambda path: DiskUsage(1, 100, 0))
    a = cast(FakeLog, lm.create_partition("a", 0))
    a.add_segment(10 * MB, 0)
    assert lm.budget_pass(clock.time_ms()).deletions == ()
    lm.check_writable()
