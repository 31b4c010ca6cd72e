"""Retention with the Spark bridge on: unshipped segments are kept; only the disk budget may take them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.storage.log_manager_config import LogManagerConfig
from tests.unit.storage.log_manager_support import add_segments, bases, batch, make

HOUR = 3_600_000


class Marks:
    """A stand-in for Shipper.is_shipped: per partition, the highest shipped base offset."""

    def __init__(self, unshipped_topics: tuple[str, ...] = ()) -> None:
        self.marks: dict[tuple[str, int], int] = {}
        self.others_shipped = True  # topics the bridge does not ship count as shipped
        self.bridged = set(unshipped_topics)

    def __call__(self, topic: str, partition: int, base_offset: int) -> bool:
        if topic not in self.bridged:
            return self.others_shipped
        mark = self.marks.get((topic, partition))
        return mark is not None and base_offset <= mark


def test_retention_keeps_unshipped_segments_until_shipped(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    marks = Marks(("t",))
    lm = make(tmp_path, clock, is_shipped=marks)
    plog = lm.create_partition("t", 0, {"retention.ms": str(HOUR)})
    add_segments(plog, [now - 3 * HOUR, now - 2 * HOUR, now - 2 * HOUR], now)
    assert lm.retention_pass(now) == 0
    assert bases(plog) == [0, 10, 20] and lm.retention_held_segments == 3
    marks.marks[("t", 0)] = 0  # the first segment landed
    assert lm.retention_pass(now) == 1
    assert bases(plog) == [10, 20] and lm.retention_held_segments == 2
    marks.marks[("t", 0)] = 20
    assert lm.retention_pass(now) == 2
    assert bases(plog) == [] and lm.retention_held_segments == 0


def test_retention_of_topics_not_shipped_is_unchanged(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock, is_shipped=Marks(("bridged",)))
    plog = lm.create_partition("other", 0, {"retention.ms": str(HOUR)})
    add_segments(plog, [now - 3 * HOUR, now - 2 * HOUR], now)
    plog.append(batch(5, now - 2 * HOUR), leader_epoch=0, now_ms=now)  # an expired active segment
    plog.high_watermark = plog.log_end_offset
    # The log's own rule runs: both closed segments go and the expired active one is rolled and goes too.
    assert lm.retention_pass(now) == 3
    assert plog.size_bytes == 0


def test_budget_deletes_unshipped_only_as_last_resort_with_warning_and_metric(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    now = clock.time_ms()
    marks = Marks(("t",))
    lm = make(tmp_path, clock, is_shipped=marks)
    plog = lm.create_partition("t", 0)
    size = add_segments(plog, [now - 3 * HOUR, now - 2 * HOUR, now - HOUR], now)
    marks.marks[("t", 0)] = 0
    lm.config = LogManagerConfig(log_dirs=lm.config.log_dirs, log_dirs_max_bytes=2 * size)
    lm.budget_pass(now)  # one segment over: the shipped one is enough
    assert bases(plog) == [10, 20] and lm.unshipped_deleted_total == 0
    lm.config = LogManagerConfig(log_dirs=lm.config.log_dirs, log_dirs_max_bytes=size)
    with caplog.at_level(logging.WARNING, logger="kafkad.storage.log_manager"):
        lm.budget_pass(now)
    assert bases(plog) == [20] and lm.unshipped_deleted_total == 1
    assert any("NOT" in r.getMessage() and "shipped" in r.getMessage() for r in caplog.records)
