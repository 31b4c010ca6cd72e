"""A partition whose files cannot be loaded goes offline alone; every other partition loads and serves.

Real damage on a real filesystem: `chattr +i` makes a file immutable, so even root gets EPERM opening it
for writing (the broker opens segments and indexes read-write), a `.log` replaced by a directory gives
EISDIR, a torn checkpoint is a file cut in the middle. The tests need chattr and a filesystem that
supports it (ext4, xfs, btrfs): without them they fail, they do not skip.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.log_dir_layout import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT
from kafkad.storage.log_manager import LogManager
from kafkad.storage.log_offline import LogIOError
from tests.unit.storage.log_manager_support import RecordingOpener, batch, make


def chattr_i(paths: list[Path], path: Path) -> None:
    subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
    paths.append(path)


def three_partitions(tmp_path: Path) -> dict[tuple[str, int], Path]:
    """Topics a (2 partitions) and b (1), 5 records each, cleanly shut down; their directories."""
    lm = make(tmp_path)
    dirs = {}
    for topic, p in (("a", 0), ("a", 1), ("b", 0)):
        plog = lm.create_partition(topic, p)
        plog.append(batch(5), leader_epoch=0, now_ms=0)
        dirs[(topic, p)] = plog.directory
    lm.shutdown()
    return dirs


def serves(lm: LogManager, topic: str, partition: int) -> None:
    plog = lm.get(topic, partition)
    assert plog is not None and plog.log_end_offset == 5
    lm.append(topic, partition, batch(1), leader_epoch=0, now_ms=0)
    assert plog.log_end_offset == 6


def test_an_unopenable_log_takes_only_its_partition_offline(
    tmp_path: Path, immutable: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    dirs = three_partitions(tmp_path)
    bad = dirs[("a", 1)] / "00000000000000000000.log"
    chattr_i(immutable, bad)
    with caplog.at_level(logging.ERROR):
        lm = make(tmp_path)
    assert lm.get("a", 1) is None
    off = lm.offline("a", 1)
    assert off is not None and off.path == str(bad) and "errno" in off.reason
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and str(bad) in errors[0] and "a-1" in errors[0], errors
    serves(lm, "a", 0)
    serves(lm, "b", 0)
    with pytest.raises(KafkaError) as err:  # never a fresh empty log over the failed files
        lm.create_partition("a", 1)
    assert err.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    lm.shutdown()
    # Its offsets stay in the checkpoints; once the disk is repaired it loads again, whole.
    subprocess.run(["chattr", "-i", str(bad)], check=True)
    again = make(tmp_path)
    serves(again, "a", 1)
    again.shutdown()


def test_an_index_that_cannot_be_rebuilt_takes_its_partition_offline(
    tmp_path: Path, immutable: list[Path]
) -> None:
    dirs = three_partitions(tmp_path)
    index = dirs[("b", 0)] / "00000000000000000000.index"
    index.write_bytes(b"\xff" * 24)  # garbage, and read-only for everyone: no rebuild possible
    chattr_i(immutable, index)
    lm = make(tmp_path)
    off = lm.offline("b", 0)
    assert off is not None and off.path == str(index)
    serves(lm, "a", 0)
    serves(lm, "a", 1)
    lm.shutdown()


def test_a_log_that_is_not_a_file_takes_its_partition_offline(tmp_path: Path) -> None:
    dirs = three_partitions(tmp_path)
    log = dirs[("a", 0)] / "00000000000000000000.log"
    log.unlink()
    log.mkdir()
    lm = make(tmp_path)
    off = lm.offline("a", 0)
    assert off is not None and off.path == str(log) and "directory" in off.reason.lower()
    serves(lm, "a", 1)
    serves(lm, "b", 0)
    lm.shutdown()


def test_a_torn_recovery_point_checkpoint_recovers_its_dir(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    three_partitions(tmp_path)
    for d in ("d1", "d2"):
        cp = tmp_path / d / RECOVERY_POINT_CHECKPOINT
        cp.write_bytes(cp.read_bytes()[:7])  # cut in the middle of an entry
    opener = RecordingOpener()
    with caplog.at_level(logging.WARNING):
        lm = make(tmp_path, opener=opener)
    assert all(r.recover and r.recovery_point == 0 for r in opener.requests)
    assert any(RECOVERY_POINT_CHECKPOINT in r.getMessage() for r in caplog.records)
    for tp in (("a", 0), ("a", 1), ("b", 0)):
        serves(lm, *tp)
    assert not lm.offline_logs()
    lm.shutdown()


def test_an_unreadable_recovery_point_checkpoint_recovers_its_dir(tmp_path: Path) -> None:
    three_partitions(tmp_path)
    cp = tmp_path / "d1" / RECOVERY_POINT_CHECKPOINT
    cp.unlink()
    cp.mkdir()  # reading it fails with EISDIR, as a bad sector fails with EIO
    opener = RecordingOpener()
    lm = make(tmp_path, opener=opener)
    assert {r.path.parent.name for r in opener.requests if r.recover} == {"d1"}
    for tp in (("a", 0), ("a", 1), ("b", 0)):
        serves(lm, *tp)
    cp.rmdir()  # so the shutdown can write it again
    lm.shutdown()


def test_a_torn_leader_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    lm = make(tmp_path)
    plog = lm.create_partition("e", 0)
    plog.append(batch(2), leader_epoch=3, now_ms=0)
    plog.append(batch(2), leader_epoch=5, now_ms=0)
    expected = plog.leader_epoch_cache.entries
    directory = plog.directory
    lm.shutdown()
    (directory / "leader-epoch-checkpoint").write_text("0\n2\n3 0\n5")  # torn mid-line
    again = make(tmp_path)
    reloaded = again.get("e", 0)
    assert reloaded is not None and reloaded.leader_epoch_cache.entries == expected == [(3, 0), (5, 2)]
    again.shutdown()


def test_a_runtime_io_error_takes_the_partition_offline_and_its_dir_recovers(tmp_path: Path) -> None:
    lm = make(tmp_path)
    for p in range(2):
        lm.create_partition("r", p).append(batch(5), leader_epoch=0, now_ms=0)
    failing = lm.get("r", 0)
    assert failing is not None
    d = lm.log_dir_of("r", 0)
    failure = LogIOError(failing.active_segment.log_path, OSError(5, "Input/output error"))
    assert not failure.transient
    off = lm.take_offline("r", 0, failure)
    assert off is not None and off.path == str(failing.active_segment.log_path)
    assert lm.get("r", 0) is None and lm.offline("r", 0) == off
    assert off.recovery_point == failing.recovery_point and off.high_watermark == failing.high_watermark
    serves_other = lm.get("r", 1)
    assert serves_other is not None
    lm.append("r", 1, batch(1), leader_epoch=0, now_ms=0)
    lm.shutdown()
    assert d is not None and not (Path(d) / CLEAN_SHUTDOWN_FILE).exists()  # its dir recovers at start
    opener = RecordingOpener()
    again = make(tmp_path, opener=opener)
    assert {(r.topic, r.partition): r.recover for r in opener.requests}[("r", 0)]
    plog = again.get("r", 0)
    assert plog is not None and plog.log_end_offset == 5  # nothing acknowledged was lost
    again.shutdown()


def test_a_full_disk_is_transient() -> None:
    assert LogIOError("/x", OSError(28, "No space left on device")).transient
    assert not LogIOError("/x", OSError(5, "Input/output error")).transient


def test_a_log_dir_that_cannot_be_written_at_shutdown_only_loses_its_marker(
    tmp_path: Path, immutable: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    lm = make(tmp_path)
    for p in range(2):  # one partition per log dir (the fewest-partitions placement)
        lm.create_partition("s", p).append(batch(5), leader_epoch=0, now_ms=0)
    bad_dir, good_dir = lm.log_dir_of("s", 0), lm.log_dir_of("s", 1)
    assert bad_dir is not None and good_dir is not None and bad_dir != good_dir
    chattr_i(immutable, Path(bad_dir))  # no checkpoint, no marker can be created in it
    with caplog.at_level(logging.ERROR):
        lm.shutdown()  # used to raise: the checkpoints of the other dir and its marker were not written
    assert any(bad_dir in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    assert (Path(good_dir) / CLEAN_SHUTDOWN_FILE).exists()
    assert not (Path(bad_dir) / CLEAN_SHUTDOWN_FILE).exists()
    subprocess.run(["chattr", "-i", bad_dir], check=True)
    opener = RecordingOpener()
    again = make(tmp_path, opener=opener)
    assert {(r.topic, r.partition): r.recover for r in opener.requests} == {("s", 0): True, ("s", 1): False}
    for p in range(2):
        plog = again.get("s", p)
        assert plog is not None and plog.log_end_offset == 5
    again.shutdown()


def test_a_retention_pass_failing_on_one_partition_still_serves_the_others(
    tmp_path: Path, immutable: list[Path]
) -> None:
    """Retention renames old segments to *.deleted; in an immutable dir that fails (EPERM). That partition
    goes offline (and the ReplicaManager hears of it); the others' retention is applied all the same.
    It used to abort the whole pass at the failing partition, every time: the others never shrank."""
    from kafkad.clock import ManualClock
    from tests.unit.storage.log_manager_support import add_segments, bases

    clock = ManualClock()
    now = clock.time_ms()
    lm = make(tmp_path, clock)
    heard: list[tuple[str, int]] = []
    lm.on_offline = lambda off: heard.append((off.topic, off.partition))
    logs = [lm.create_partition(t, 0, {"retention.ms": "3600000"}) for t in ("a", "b", "c")]
    for plog in logs:
        add_segments(plog, [now - 3 * 3_600_000, now - 2 * 3_600_000, now], now)
    chattr_i(immutable, logs[0].directory)
    assert lm.retention_pass(now) == 4  # b and c: two old segments each
    assert heard == [("a", 0)] and lm.get("a", 0) is None and lm.offline("a", 0) is not None
    assert bases(logs[1]) == [20] and bases(logs[2]) == [20]
    lm.shutdown()
