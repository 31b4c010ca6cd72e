"""LogManager.load_first / load_rest: after a crash the logs that need recovery load behind the listeners.

What must hold while they load: they are not served (get is None) and never created anew, their
checkpointed offsets survive every checkpoint written meanwhile, and a shutdown before they are
opened leaves their dir without a clean marker (the next start must still recover them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_dir_layout import CLEAN_SHUTDOWN_FILE
from kafkad.storage.log_manager import LogManager
from kafkad.storage.log_manager_config import LogManagerConfig
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.log_manager_support import RecordingOpener, batch, make

INTERNAL = "__consumer_offsets"


def _internal(topic: str) -> bool:
    return topic == INTERNAL


def _crashed(tmp_path: Path, clock: ManualClock) -> None:
    """t-0 (3 records), t-1 (5) and __consumer_offsets-0 (2), flushed, then a crash (no shutdown)."""
    lm = make(tmp_path, clock)
    for (topic, p), n in {("t", 0): 3, ("t", 1): 5, (INTERNAL, 0): 2}.items():
        plog = lm.create_partition(topic, p)
        plog.append(batch(n), leader_epoch=0, now_ms=clock.time_ms())
        plog.flush()
    lm.checkpoint_all()


def _unloaded(tmp_path: Path, clock: ManualClock, opener: RecordingOpener) -> LogManager:
    config = LogManagerConfig(log_dirs=(str(tmp_path / "d1"), str(tmp_path / "d2")))
    return LogManager(config, LogConfig(), clock, opener=opener)


def _recovery_points(tmp_path: Path) -> set[str]:
    return {
        line
        for d in ("d1", "d2")
        for line in (tmp_path / d / "recovery-point-offset-checkpoint").read_text().splitlines()[2:]
    }


def test_load_first_opens_the_internal_topics_and_leaves_the_rest_loading(tmp_path: Path) -> None:
    clock = ManualClock()
    _crashed(tmp_path, clock)
    opener = RecordingOpener()
    lm = _unloaded(tmp_path, clock, opener)
    rest = lm.load_first(_internal)
    assert [r.topic for r in opener.requests] == [INTERNAL]
    assert sorted((req.topic, req.partition) for _, req in rest) == [("t", 0), ("t", 1)]
    assert [req.recover for _, req in rest] == [True, True]
    got = lm.get(INTERNAL, 0)
    assert got is not None and got.log_end_offset == 2
    assert lm.get("t", 0) is None
    assert sorted(req.partition for req in lm.loading()) == [0, 1]
    with pytest.raises(KafkaError) as err:
        lm.create_partition("t", 1)  # never an empty log in place of one being recovered
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    lm.checkpoint_all()  # the loading partitions keep their checkpointed recovery points
    assert _recovery_points(tmp_path) == {"t 0 3", "t 1 5", f"{INTERNAL} 0 2"}

    delivered: list[Callable[[], None]] = []
    heard: list[tuple[tuple[str, int], PartitionLog | None]] = []
    lm.on_loaded = lambda tp, plog: heard.append((tp, plog))
    lm.load_rest(rest, delivered.append)
    assert lm.get("t", 0) is None  # opened, but installed only by the loop's callback
    for install in delivered:
        install()
    assert sorted(tp for tp, _ in heard) == [("t", 0), ("t", 1)]
    assert all(plog is not None for _, plog in heard)
    ends = {p: plog.log_end_offset for p in (0, 1) if (plog := lm.get("t", p)) is not None}
    assert ends == {0: 3, 1: 5}
    assert lm.loading() == []
    lm.shutdown()
    assert (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists() and (
        tmp_path / "d2" / CLEAN_SHUTDOWN_FILE
    ).exists()


def test_shutdown_before_they_load_leaves_their_dirs_unclean(tmp_path: Path) -> None:
    clock = ManualClock()
    _crashed(tmp_path, clock)
    lm = _unloaded(tmp_path, clock, RecordingOpener())
    rest = lm.load_first(_internal)
    loading_dirs = {d for d, _ in rest}
    lm.shutdown()  # load_rest never ran
    for d in ("d1", "d2"):
        marked = (tmp_path / d / CLEAN_SHUTDOWN_FILE).exists()
        assert marked == (str(tmp_path / d) not in loading_dirs), d
    assert _recovery_points(tmp_path) == {"t 0 3", "t 1 5", f"{INTERNAL} 0 2"}
    opener = RecordingOpener()
    lm2 = _unloaded(tmp_path, clock, opener)
    lm2.load()
    recovered = {(r.topic, r.partition) for r in opener.requests if r.recover}
    assert {("t", 0), ("t", 1)} <= recovered
    ends = {p: plog.log_end_offset for p in (0, 1) if (plog := lm2.get("t", p)) is not None}
    assert ends == {0: 3, 1: 5}


def test_shutdown_closes_logs_opened_but_not_installed_yet(tmp_path: Path) -> None:
    clock = ManualClock()
    _crashed(tmp_path, clock)
    lm = _unloaded(tmp_path, clock, RecordingOpener())
    rest = lm.load_first(_internal)
    lm.load_rest(rest, lambda _install: None)  # the loop never ran their install callbacks
    lm.shutdown()  # installs and closes them: they were recovered, so the dirs are clean
    assert (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists() and (
        tmp_path / "d2" / CLEAN_SHUTDOWN_FILE
    ).exists()
    opener = RecordingOpener()
    lm2 = _unloaded(tmp_path, clock, opener)
    lm2.load()
    assert not any(r.recover for r in opener.requests)
    ends = {p: plog.log_end_offset for p in (0, 1) if (plog := lm2.get("t", p)) is not None}
    assert ends == {0: 3, 1: 5}


def test_the_least_to_recover_loads_first(tmp_path: Path) -> None:
    clock = ManualClock()
    config = LogManagerConfig(log_dirs=(str(tmp_path / "d1"),), num_recovery_threads=1)
    lm = LogManager(config, LogConfig(), clock)
    lm.load()
    for p, n in ((0, 50), (1, 5), (2, 20)):
        lm.create_partition("t", p).append(batch(n), leader_epoch=0, now_ms=clock.time_ms())
    lm.checkpoint_all()  # recovery points 0: each recovers all it holds
    lm2 = LogManager(config, LogConfig(), clock)
    heard: list[tuple[str, int]] = []
    lm2.on_loaded = lambda tp, _plog: heard.append(tp)
    lm2.load_rest(lm2.load_first(_internal), lambda install: install())
    assert heard == [("t", 1), ("t", 2), ("t", 0)]
