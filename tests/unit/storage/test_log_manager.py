from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_dir_layout import CLEAN_SHUTDOWN_FILE
from kafkad.storage.topic_configs import TOPIC_CONFIG_FILE
from tests.unit.storage.log_manager_support import RecordingOpener, batch, make


def test_create_places_by_fewest_partitions_and_reloads(tmp_path: Path) -> None:
    lm = make(tmp_path)
    for topic, p in [("t", 0), ("t", 1), ("u", 0)]:
        lm.create_partition(topic, p)
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    assert [lm.log_dir_of(*tp) for tp in [("t", 0), ("t", 1), ("u", 0)]] == [d1, d2, d1]
    assert (tmp_path / "d1" / "t-0").is_dir() and (tmp_path / "d2" / "t-1").is_dir()
    assert lm.create_partition("t", 0) is lm.get("t", 0)  # existing partitions are returned
    assert lm.topics() == {"t": 2, "u": 1}
    assert lm.partitions_of("t") == [0, 1] and lm.partitions_of("none") == []
    lm.shutdown()

    again = make(tmp_path)
    assert again.topics() == {"t": 2, "u": 1}
    assert again.log_dir_of("t", 1) == d2
    again.create_partition("v", 0)
    assert again.log_dir_of("v", 0) == d2  # d1 holds 2, d2 holds 1


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a b", "t/x", "tö", "a:b"])
def test_invalid_topic_names(tmp_path: Path, name: str) -> None:
    lm = make(tmp_path)
    with pytest.raises(KafkaError) as e:
        lm.create_partition(name, 0)
    assert e.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert lm.topics() == {}


def test_longest_legal_topic_name(tmp_path: Path) -> None:
    lm = make(tmp_path)
    lm.create_partition("a.B_c-" + "x" * 243, 0)
    assert [len(t) for t in lm.topics()] == [249]


def test_clean_restart_skips_recovery_unclean_recovers(tmp_path: Path) -> None:
    clock = ManualClock()
    opener = RecordingOpener()
    lm = make(tmp_path, clock, opener)
    for p in (0, 1):
        lm.create_partition("t", p).append(batch(3), leader_epoch=0, now_ms=clock.time_ms())
    lm.shutdown()
    for d in ("d1", "d2"):
        assert (tmp_path / d / CLEAN_SHUTDOWN_FILE).exists()

    opener.requests.clear()
    lm2 = make(tmp_path, clock, opener)
    assert [r.recover for r in opener.requests] == [False, False]
    assert lm2.load_stats is not None and lm2.load_stats.recovered == 0 and lm2.load_stats.clean_dirs == 2
    # The marker is deleted at start: a crash from now on is unclean.
    assert not (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()
    t0 = lm2.get("t", 0)
    assert t0 is not None and t0.log_end_offset == 3

    opener.requests.clear()
    lm3 = make(tmp_path, clock, opener)  # lm2 "crashed": no shutdown
    assert sorted(r.recover for r in opener.requests) == [True, True]
    assert lm3.load_stats is not None and lm3.load_stats.recovered == 2
    t0 = lm3.get("t", 0)
    assert t0 is not None and t0.log_end_offset == 3


def test_shutdown_flushes_and_checkpoints(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = make(tmp_path, clock)
    lm.create_partition("t", 0).append(batch(7), leader_epoch=0, now_ms=clock.time_ms())
    lm.shutdown()
    assert (tmp_path / "d1" / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 7\n"
    assert (tmp_path / "d2" / "recovery-point-offset-checkpoint").read_text() == "0\n0\n"
    assert lm.topics() == {}


def test_checkpoint_files_exact_format_and_reload(tmp_path: Path) -> None:
    clock = ManualClock()
    opener = RecordingOpener()
    lm = make(tmp_path, clock, opener)
    for p in range(4):
        lm.create_partition("topic.x", p).append(batch(10), leader_epoch=0, now_ms=clock.time_ms())
    for p, (rp, start, hw) in {0: (5, 1, 4), 2: (9, 3, 8)}.items():
        plog = lm.get("topic.x", p)
        assert plog is not None
        plog.recovery_point, plog.log_start_offset, plog.high_watermark = rp, start, hw
    lm.checkpoint_all()
    d1 = tmp_path / "d1"
    assert (d1 / "recovery-point-offset-checkpoint").read_text() == "0\n2\ntopic.x 0 5\ntopic.x 2 9\n"
    assert (d1 / "log-start-offset-checkpoint").read_text() == "0\n2\ntopic.x 0 1\ntopic.x 2 3\n"
    assert (d1 / "replication-offset-checkpoint").read_text() == "0\n2\ntopic.x 0 4\ntopic.x 2 8\n"
    assert (
        tmp_path / "d2" / "replication-offset-checkpoint"
    ).read_text() == "0\n2\ntopic.x 1 0\ntopic.x 3 0\n"

    opener.requests.clear()
    lm2 = make(tmp_path, clock, opener)  # unclean: no shutdown
    req = next(r for r in opener.requests if r.partition == 2)
    assert (req.recovery_point, req.log_start_offset, req.high_watermark) == (9, 3, 8)
    plog = lm2.get("topic.x", 2)
    assert plog is not None and plog.high_watermark == 8 and plog.log_start_offset == 3


def test_delete_topic_renames_then_removes_after_delay(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = make(tmp_path, clock)
    for p in (0, 1):
        lm.create_partition("gone", p).append(batch(), leader_epoch=0, now_ms=clock.time_ms())
    lm.create_partition("kept", 0)
    plog = lm.get("gone", 0)
    assert plog is not None
    fd = plog.read(0, 1 << 20).slices[0].fd
    lm.delete_topic("gone")
    assert lm.topics() == {"kept": 1} and lm.get("gone", 0) is None
    assert not (tmp_path / "d1" / "gone-0").exists()
    renamed = [p.name for p in (tmp_path / "d1").iterdir() if p.name.startswith("gone-0.")]
    assert len(renamed) == 1 and re.fullmatch(r"gone-0\.[0-9a-f]{32}-delete", renamed[0])
    assert lm.collect_deletions() == []  # file.delete.delay.ms not over yet
    os.fstat(fd)  # an in-flight read's fd still works
    clock.advance(LogConfig().file_delete_delay_ms)
    assert lm.run_deletions(lm.collect_deletions()) == 2
    assert not (tmp_path / "d1" / renamed[0]).exists()
    with pytest.raises(OSError):
        os.fstat(fd)  # closed


def test_load_removes_delete_dirs_and_ignores_strays(tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    (d1 / "old-0.0123456789abcdef0123456789abcdef-delete").mkdir(parents=True)
    (d1 / "x-1-stray").mkdir()
    (d1 / "lost+found").mkdir()
    (d1 / "t-0").mkdir()
    lm = make(tmp_path)
    assert lm.topics() == {"t": 1}
    assert lm.run_deletions(lm.collect_deletions()) == 1
    assert not (d1 / "old-0.0123456789abcdef0123456789abcdef-delete").exists()
    assert (d1 / "x-1-stray").exists() and (d1 / "lost+found").exists()


def test_same_partition_in_two_dirs_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "d1" / "t-0").mkdir(parents=True)
    (tmp_path / "d2" / "t-0").mkdir(parents=True)
    with pytest.raises(KafkaError, match="two log dirs"):
        make(tmp_path)


def test_topic_overrides_persist_and_apply(tmp_path: Path) -> None:
    lm = make(tmp_path)
    lm.create_partition("t", 0, {"retention.ms": "1000"})
    t1 = lm.create_partition("t", 1)  # later partitions inherit the topic's overrides
    assert t1.config.retention_ms == 1000
    assert (tmp_path / "d2" / "t-1" / TOPIC_CONFIG_FILE).exists()
    with pytest.raises(KafkaError) as e:
        lm.set_topic_overrides("t", {"retention.ms": "soon"})
    assert e.value.code == ErrorCode.INVALID_CONFIG
    assert lm.topic_overrides("t") == {"retention.ms": "1000"}
    cfg = lm.set_topic_overrides("t", {"retention.bytes": "4096", "segment.bytes": "1048576"})
    assert cfg.retention_bytes == 4096 and cfg.retention_ms == LogConfig().retention_ms
    assert t1.config is cfg
    lm.shutdown()

    lm2 = make(tmp_path)
    assert lm2.topic_overrides("t") == {"retention.bytes": "4096", "segment.bytes": "1048576"}
    reopened = lm2.get("t", 1)
    assert reopened is not None and reopened.config.segment_bytes == 1048576
    lm2.set_topic_overrides("t", {})
    assert not (tmp_path / "d1" / "t-0" / TOPIC_CONFIG_FILE).exists()
    lm2.shutdown()
    assert make(tmp_path).topic_overrides("t") == {}


def test_flush_pass_by_messages_and_time(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = make(tmp_path, clock)
    now = clock.time_ms()
    lm.create_partition("m", 0, {"flush.messages": "5"}).append(batch(5), leader_epoch=0, now_ms=now)
    lm.create_partition("t", 0, {"flush.ms": "1000"}).append(batch(1), leader_epoch=0, now_ms=now)
    lm.create_partition("idle", 0, {"flush.ms": "1000"})
    assert [p.topic for p in lm.flush_pass(now)] == ["m"]
    clock.advance(1000)
    due = lm.flush_pass(clock.time_ms())
    assert sorted(p.topic for p in due) == ["m", "t"]  # "idle" has nothing unflushed
    lm.flush_logs(due)
    assert [p.recovery_point for p in due] == [p.log_end_offset for p in due]
    assert lm.flush_pass(clock.time_ms()) == []


def test_recovery_flush_pass_flushes_what_waited_and_checkpoints_only_recovery_points(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = make(tmp_path, clock, recovery_point_flush_ms=2000)
    now = clock.time_ms()
    big = lm.create_partition("big", 0)
    big.append(batch(3000), leader_epoch=0, now_ms=now)  # ~330 KB: over RECOVERY_FLUSH_MIN_BYTES
    trickle = lm.create_partition("trickle", 0)
    trickle.append(batch(1), leader_epoch=0, now_ms=now)
    lm.create_partition("idle", 0)
    assert lm.recovery_flush_pass(clock.monotonic_ms()) == []  # nothing has waited 2 s yet
    clock.advance(2000)
    due = lm.recovery_flush_pass(clock.monotonic_ms())
    assert due == [big]  # the one-batch trickle costs recovery nothing: no fsyncs for it
    lm.flush_logs(due)
    lm.checkpoint_recovery_points()
    d = tmp_path / lm.log_dir_of("big", 0)  # type: ignore[operator]
    assert f"big 0 {big.log_end_offset}" in (d / "recovery-point-offset-checkpoint").read_text()
    assert not (d / "log-start-offset-checkpoint").exists()  # the other checkpoints keep their timer
    clock.advance(2000)
    assert lm.recovery_flush_pass(clock.monotonic_ms()) == []  # flushed, and the trickle is still small
    trickle.append(batch(3000), leader_epoch=0, now_ms=now)
    assert lm.recovery_flush_pass(clock.monotonic_ms()) == [trickle]


def test_recovery_flush_pass_is_off_at_zero(tmp_path: Path) -> None:
    clock = ManualClock()
    lm = make(tmp_path, clock)
    lm.create_partition("big", 0).append(batch(3000), leader_epoch=0, now_ms=clock.time_ms())
    clock.advance(3_600_000)
    assert lm.recovery_flush_pass(clock.monotonic_ms()) == []


def test_create_with_overrides_updates_the_topics_other_partitions(tmp_path: Path) -> None:
    lm = make(tmp_path)
    t0 = lm.create_partition("t", 0)
    t1 = lm.create_partition("t", 1, {"retention.ms": "5000"})
    assert t0.config.retention_ms == 5000 and t1.config.retention_ms == 5000
    assert (tmp_path / "d1" / "t-0" / TOPIC_CONFIG_FILE).read_text().endswith("retention.ms=5000\n")
