from __future__ import annotations

import re
from pathlib import Path
from typing import cast

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_dir_layout import CLEAN_SHUTDOWN_FILE
from kafkad.storage.log_manager import LogManager
from kafkad.storage.log_manager_config import LogManagerConfig
from kafkad.storage.topic_configs import TOPIC_CONFIG_FILE
from tests.unit.storage.fake_log import FakeLog, FakeOpener


def make(tmp_path: Path, opener: FakeOpener, clock: ManualClock | None = None, **cfg: object) -> LogManager:
    config = LogManagerConfig(log_dirs=(str(tmp_path / "d1"), str(tmp_path / "d2")), **cfg)  # type: ignore[arg-type]
    lm = LogManager(config, LogConfig(), clock or ManualClock(), opener=opener)
    lm.load()
    return lm


def fake(lm: LogManager, topic: str, p: int) -> FakeLog:
    plog = lm.get(topic, p)
    assert plog is not None
    return cast(FakeLog, plog)


def test_create_places_by_fewest_partitions_and_reloads(tmp_path: Path) -> None:
    opener = FakeOpener()
    lm = make(tmp_path, opener)
    for topic, p in [("t", 0), ("t", 1), ("u", 0)]:
        lm.create_partition(topic, p)
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    assert [lm.log_dir_of(*tp) for tp in [("t", 0), ("t", 1), ("u", 0)]] == [d1, d2, d1]
    assert (tmp_path / "d1" / "t-0").is_dir() and (tmp_path / "d2" / "t-1").is_dir()
    assert lm.create_partition("t", 0) is lm.get("t", 0)  # existing partitions are returned
    assert lm.topics() == {"t": 2, "u": 1}
    assert lm.partitions_of("t") == [0, 1]
    lm.shutdown()

    again = make(tmp_path, opener)
    assert again.topics() == {"t": 2, "u": 1}
    assert again.log_dir_of("t", 1) == d2
    again.create_partition("v", 0)
    assert again.log_dir_of("v", 0) == d2  # d1 holds 2, d2 holds 1


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a b", "t/x", "tö"])
def test_invalid_topic_names(tmp_path: Path, name: str) -> None:
    lm = make(tmp_path, FakeOpener())
    with pytest.raises(KafkaError) as e:
        lm.create_partition(name, 0)
    assert e.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert lm.topics() == {}


def test_longest_legal_topic_name(tmp_path: Path) -> None:
    lm = make(tmp_path, FakeOpener())
    lm.create_partition("a.B_c-" + "x" * 243, 0)
    assert len(next(iter(lm.topics()))) == 249


def test_clean_restart_skips_recovery_unclean_recovers(tmp_path: Path) -> None:
    opener = FakeOpener()
    lm = make(tmp_path, opener)
    logs = [cast(FakeLog, lm.create_partition("t", p)) for p in (0, 1)]
    lm.shutdown()
    assert [plog.closed for plog in logs] == [[True], [True]]
    for d in ("d1", "d2"):
        assert (tmp_path / d / CLEAN_SHUTDOWN_FILE).exists()

    opener.requests.clear()
    lm2 = make(tmp_path, opener)
    assert [r.recover for r in opener.requests] == [False, False]
    assert lm2.load_stats is not None and lm2.load_stats.recovered == 0 and lm2.load_stats.clean_dirs == 2
    # The marker is deleted at start: a crash from now on is unclean.
    assert not (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()

    opener.requests.clear()
    lm3 = make(tmp_path, opener)  # lm2 "crashed": no shutdown
    assert sorted(r.recover for r in opener.requests) == [True, True]
    assert lm3.load_stats is not None and lm3.load_stats.recovered == 2


def test_shutdown_flushes_closes_and_checkpoints(tmp_path: Path) -> None:
    opener = FakeOpener()
    lm = make(tmp_path, opener)
    a = cast(FakeLog, lm.create_partition("t", 0))
    a.add_segment(100, 1, count=7)
    lm.shutdown()
    assert a.flushes == 1 and a.closed == [True]
    assert (tmp_path / "d1" / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 7\n"
    assert (tmp_path / "d2" / "recovery-point-offset-checkpoint").read_text() == "0\n0\n"


def test_checkpoint_files_exact_format_and_reload(tmp_path: Path) -> None:
    opener = FakeOpener()
    lm = make(tmp_path, opener)
    for p in range(4):
        lm.create_partition("topic.x", p)
    fake(lm, "topic.x", 0).set_offsets(recovery_point=5, log_start=1, hw=4)
    fake(lm, "topic.x", 2).set_offsets(recovery_point=9, log_start=3, hw=8)
    lm.checkpoint_all()
    d1 = tmp_path / "d1"
    assert (d1 / "recovery-point-offset-checkpoint").read_text() == "0\n2\ntopic.x 0 5\ntopic.x 2 9\n"
    assert (d1 / "log-start-offset-checkpoint").read_text() == "0\n2\ntopic.x 0 1\ntopic.x 2 3\n"
    assert (d1 / "replication-offset-checkpoint").read_text() == "0\n2\ntopic.x 0 4\ntopic.x 2 8\n"
    assert (
        tmp_path / "d2" / "replication-offset-checkpoint"
    ).read_text() == "0\n2\ntopic.x 1 0\ntopic.x 3 0\n"

    opener.requests.clear()
    make(tmp_path, opener)
    req = next(r for r in opener.requests if r.partition == 2)
    assert (req.recovery_point, req.log_start_offset, req.high_watermark) == (9, 3, 8)


def test_delete_topic_renames_then_removes_after_delay(tmp_path: Path) -> None:
    clock = ManualClock()
    opener = FakeOpener()
    lm = make(tmp_path, opener, clock)
    lm.create_partition("gone", 0)
    lm.create_partition("gone", 1)
    lm.create_partition("kept", 0)
    plog = fake(lm, "gone", 0)
    lm.delete_topic("gone")
    assert lm.topics() == {"kept": 1} and lm.get("gone", 0) is None
    assert not (tmp_path / "d1" / "gone-0").exists()
    renamed = [p.name for p in (tmp_path / "d1").iterdir() if p.name.startswith("gone-0.")]
    assert len(renamed) == 1 and re.fullmatch(r"gone-0\.[0-9a-f]{32}-delete", renamed[0])
    assert lm.delete_pending(clock.time_ms()) == 0  # file.delete.delay.ms not over yet
    assert plog.closed == []
    clock.advance(LogConfig().file_delete_delay_ms)
    assert lm.delete_pending(clock.time_ms()) == 2
    assert plog.closed == [False]  # no producer snapshot for a deleted log
    assert not (tmp_path / "d1" / renamed[0]).exists()
    assert lm.next_delete_due_ms() is None


def test_load_removes_delete_dirs_and_ignores_strays(tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    (d1 / "old-0.0123456789abcdef0123456789abcdef-delete").mkdir(parents=True)
    (d1 / "x-1-stray").mkdir()
    (d1 / "lost+found").mkdir()
    (d1 / "t-0").mkdir()
    opener = FakeOpener()
    lm = make(tmp_path, opener)
    assert lm.topics() == {"t": 1}
    assert lm.delete_pending(ManualClock().time_ms()) == 1
    assert not (d1 / "old-0.0123456789abcdef0123456789abcdef-delete").exists()
    assert (d1 / "x-1-stray").exists() and (d1 / "lost+found").exists()


def test_same_partition_in_two_dirs_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "d1" / "t-0").mkdir(parents=True)
    (tmp_path / "d2" / "t-0").mkdir(parents=True)
    with pytest.raises(KafkaError, match="two log dirs"):
        make(tmp_path, FakeOpener())


def test_topic_overrides_persist_and_apply(tmp_path: Path) -> None:
    opener = FakeOpener()
    lm = make(tmp_path, opener)
    lm.create_partition("t", 0, {"retention.ms": "1000"})
    lm.create_partition("t", 1)  # later partitions inherit the topic's overrides
    assert fake(lm, "t", 1).config.retention_ms == 1000
    assert (tmp_path / "d2" / "t-1" / TOPIC_CONFIG_FILE).exists()
    with pytest.raises(KafkaError) as e:
        lm.set_topic_overrides("t", {"retention.ms": "soon"})
    assert e.value.code == ErrorCode.INVALID_CONFIG
    assert lm.topic_overrides("t") == {"retention.ms": "1000"}
    cfg = lm.set_topic_overrides("t", {"retention.bytes": "4096", "segment.bytes": "1048576"})
    assert cfg.retention_bytes == 4096 and cfg.retention_ms == LogConfig().retention_ms
    assert fake(lm, "t", 0).config is cfg
    lm.shutdown()

    lm2 = make(tmp_path, opener)
    assert lm2.topic_overrides("t") == {"retention.bytes": "4096", "segment.bytes": "1048576"}
    assert fake(lm2, "t", 1).config.segment_bytes == 1048576
    lm2.set_topic_overrides("t", {})
    assert not (tmp_path / "d1" / "t-0" / TOPIC_CONFIG_FILE).exists()
    lm2.shutdown()
    assert make(tmp_path, opener).topic_overrides("t") == {}


def test_flush_pass_by_messages_and_time(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = make(tmp_path, FakeOpener(), clock)
    lm.create_partition("m", 0, {"flush.messages": "5"})
    lm.create_partition("t", 0, {"flush.ms": "1000"})
    lm.create_partition("idle", 0, {"flush.ms": "1000"})
    fake(lm, "m", 0).add_segment(10, 1, count=5)
    fake(lm, "t", 0).add_segment(10, 1, count=1)
    assert [p.topic for p in lm.flush_pass(clock.time_ms())] == ["m"]
    clock.advance(1000)
    due = lm.flush_pass(clock.time_ms())
    assert sorted(p.topic for p in due) == ["m", "t"]  # "idle" has nothing unflushed
    lm.flush_logs(due, clock.time_ms())
    assert lm.flush_pass(clock.time_ms()) == []
