from __future__ import annotations

from pathlib import Path

from kafkad.storage.leader_epoch import LeaderEpochCache


def make(tmp_path: Path) -> LeaderEpochCache:
    cache = LeaderEpochCache.load(tmp_path)
    for epoch, start in [(1, 0), (3, 100), (5, 250)]:
        assert cache.assign(epoch, start)
    return cache


def test_assign_only_on_new_epoch(tmp_path: Path) -> None:
    cache = make(tmp_path)
    assert not cache.assign(5, 300)
    assert not cache.assign(-1, 400)
    assert cache.entries == [(1, 0), (3, 100), (5, 250)]
    assert LeaderEpochCache.load(tmp_path).entries == cache.entries  # checkpoint written


def test_assign_replaces_conflicting_entries(tmp_path: Path) -> None:
    cache = make(tmp_path)
    cache.assign(4, 200)
    assert cache.entries == [(1, 0), (3, 100), (4, 200)]


def test_end_offset_for_epoch_matches_kafka(tmp_path: Path) -> None:
    cache = make(tmp_path)
    leo = 400
    assert cache.end_offset_for(5, leo) == (5, 400)  # latest epoch ends at the LEO
    assert cache.end_offset_for(3, leo) == (3, 250)
    assert cache.end_offset_for(4, leo) == (3, 250)  # unknown epoch: floor epoch, next start
    assert cache.end_offset_for(0, leo) == (0, 0)  # below the first epoch
    assert cache.end_offset_for(6, leo) == (-1, -1)
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert cache.epoch_for_offset(120) == 3


def test_truncation(tmp_path: Path) -> None:
    cache = make(tmp_path)
    cache.truncate_from_end(250)
    assert cache.entries == [(1, 0), (3, 100)]
    cache.truncate_from_start(150)
    assert cache.entries == [(3, 150)]
    assert LeaderEpochCache.load(tmp_path).entries == [(3, 150)]
    cache.clear()
    assert LeaderEpochCache.load(tmp_path).entries == []
