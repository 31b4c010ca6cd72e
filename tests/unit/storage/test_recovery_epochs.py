"""Leader epochs after a crash: rebuilt from the recovered batches with at most one checkpoint write."""

from __future__ import annotations

from pathlib import Path

from kafkad.clock import ManualClock
from kafkad.storage.checkpoints import read_epochs
from kafkad.storage.leader_epoch import CHECKPOINT_FILE, LeaderEpochCache
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log

SMALL = {"segment.bytes": "4096", "index.interval.bytes": "256"}


def test_deferred_writes_write_once_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    cache = LeaderEpochCache(path, [(0, 0)])
    cache.flush()
    inode = path.stat().st_ino
    with cache.deferred_writes():
        cache.assign(2, 10)
        cache.assign(3, 20)
        cache.truncate_from_end(20)
        assert read_epochs(path) == [(0, 0)]  # nothing written inside the block
        assert path.stat().st_ino == inode
    assert read_epochs(path) == [(0, 0), (2, 10)] == cache.entries


def test_deferred_writes_skip_the_write_when_nothing_changed(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    cache = LeaderEpochCache(path, [(0, 0), (2, 10)])
    cache.flush()
    inode = path.stat().st_ino
    with cache.deferred_writes():
        cache.truncate_from_end(10)
        cache.assign(2, 10)  # back to where it was
    assert path.stat().st_ino == inode  # the file was not replaced
    assert cache.entries == [(0, 0), (2, 10)]
    cache.assign(5, 30)  # outside a block: written at once again
    assert read_epochs(path) == [(0, 0), (2, 10), (5, 30)]


def test_crash_with_unchanged_epochs_leaves_the_checkpoint_alone(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    for epoch in (1, 1, 4, 4, 4, 4, 4, 4):
        log.append(memoryview(make_batch(40)), leader_epoch=epoch, now_ms=0)
    assert log.segment_count > 1
    log.leader_epoch_cache.flush()
    path = log.directory / CHECKPOINT_FILE
    inode = path.stat().st_ino
    again = PartitionLog.open(log.directory, log.config, clock, recover=True)
    assert again.stats.recovered_segments == again.segment_count
    assert again.leader_epoch_cache.entries == [(1, 0), (4, 80)]
    assert path.stat().st_ino == inode


def test_crash_repairs_a_lost_epoch_with_one_write(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **SMALL)
    for epoch in (1, 2, 2, 6):
        log.append(memoryview(make_batch(3)), leader_epoch=epoch, now_ms=0)
    (log.directory / CHECKPOINT_FILE).write_text("0\n2\n1 0\n9 100\n")  # lost 2 and 6; 9 never happened
    again = PartitionLog.open(log.directory, log.config, clock, recover=True)
    assert again.leader_epoch_cache.entries == [(1, 0), (2, 3), (6, 9)]
    assert read_epochs(log.directory / CHECKPOINT_FILE) == [(1, 0), (2, 3), (6, 9)]
