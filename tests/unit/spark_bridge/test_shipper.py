from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.spark_bridge.landing import FilesystemLanding, LandingWriter
from kafkad.spark_bridge.manifest import Manifest
from kafkad.spark_bridge.rate_limit import Backoff
from kafkad.spark_bridge.segment_source import ClosedSegment, DirectorySegmentSource
from kafkad.spark_bridge.shipper import CHECKPOINT_FILE, Shipper, ShipperConfig, ShipResult
from kafkad.storage.records import Compression, iter_batches
from tests.unit.spark_bridge.factory import BASE_TS, write_partition


class Boom(Exception):
    pass


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    logs = tmp_path / "logs"
    landing = tmp_path / "landing"
    landing.mkdir()
    for topic in ("orders", "clicks", "__consumer_offsets"):
        write_partition(logs, topic, 0, segments=3, batches_per_segment=4, records_per_batch=5)
    return logs, landing


def _shipper(logs: Path, landing: Path, clock: ManualClock, **kw: object) -> Shipper:
    slept: list[float] = []

    def sleep(s: float) -> bool:
        slept.append(s)
        clock.advance(max(1, round(s * 1000)))
        return True

    cfg = ShipperConfig(**kw)  # type: ignore[arg-type]
    sh = Shipper(
        cfg,
        DirectorySegmentSource([logs]),
        FilesystemLanding(landing),
        logs / CHECKPOINT_FILE,
        clock=clock,
        sleep=sleep,
    )
    sh.slept = slept  # type: ignore[attr-defined]
    return sh


def _visible(landing: Path) -> list[str]:
    return sorted(str(p.relative_to(landing)) for p in landing.rglob("*") if p.is_file())


def test_ships_closed_segments_with_manifest_and_checkpoint(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    sh = _shipper(logs, landing, ManualClock())
    results = sh.run_once()
    # 3 closed segments each of orders and clicks; internal topic and active segments excluded
    assert len(results) == 6 and all(r.copied for r in results)
    files = _visible(landing)
    assert "orders/0/00000000000000000000.log" in files
    assert not any("__consumer_offsets" in f or f.startswith(".") or "/." in f for f in files)
    assert len(files) == 12
    src = (logs / "orders-0" / "00000000000000000000.log").read_bytes()
    assert (landing / "orders/0/00000000000000000000.log").read_bytes() == src
    m = Manifest.from_json((landing / "orders/0/00000000000000000000.manifest.json").read_bytes())
    assert m.record_count == 15 and m.batch_count == 4 and m.size == len(src)
    assert m.last_offset == sum(len(b.records) for b in iter_batches(src)) - 1
    assert m.first_timestamp == BASE_TS
    assert sh.is_shipped("orders", 0, 16) and not sh.is_shipped("orders", 0, 48)
    assert (logs / CHECKPOINT_FILE).read_text().startswith("0\n2\n")
    # a second pass and a restarted shipper ship nothing
    assert sh.run_once() == []
    assert _shipper(logs, landing, ManualClock()).run_once() == []


def test_topic_regexes(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    sh = _shipper(logs, landing, ManualClock(), topics=("ord.*", "__consumer_offsets"))
    assert {r.segment.topic for r in sh.run_once()} == {"orders", "__consumer_offsets"}
    assert sh.wants("orders2x") and not sh.wants("xorders")
    assert not sh.wants("clicks")


def test_kill_mid_copy_leaves_nothing_visible_and_restart_ships_once(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    seen: list[int] = []

    def hook(seg: ClosedSegment, copied: int) -> None:
        seen.append(copied)
        if seg.topic == "orders" and seg.base_offset == 16:
            raise Boom

    sh = _shipper(logs, landing, ManualClock(), topics=("orders",), rate_limit_bytes_per_sec=100_000)
    sh._copy_hook = hook
    with pytest.raises(Boom):
        sh.run_once()
    files = _visible(landing)
    assert files == ["orders/0/00000000000000000000.log", "orders/0/00000000000000000000.manifest.json"]
    sh2 = _shipper(logs, landing, ManualClock(), topics=("orders",))
    results = sh2.run_once()
    assert [(r.segment.base_offset, r.copied) for r in results] == [(16, True), (32, True)]
    assert len(_visible(landing)) == 6


def test_landed_but_not_checkpointed_is_not_copied_again(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    _shipper(logs, landing, ManualClock(), topics=("orders",)).run_once()
    (logs / CHECKPOINT_FILE).unlink()
    mtime = (landing / "orders/0/00000000000000000000.log").stat().st_mtime_ns
    results = _shipper(logs, landing, ManualClock(), topics=("orders",)).run_once()
    assert len(results) == 3 and not any(r.copied for r in results)
    assert (landing / "orders/0/00000000000000000000.log").stat().st_mtime_ns == mtime


def test_unreachable_landing_backs_off_then_ships_everything(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    landing.rmdir()
    clock = ManualClock()
    sh = _shipper(logs, landing, clock, topics=("clicks",), backoff=Backoff(100, 1_000))
    slept: list[float] = sh.slept  # type: ignore[attr-defined]

    def sleep(s: float) -> bool:
        slept.append(s)
        if len(slept) == 6:
            landing.mkdir()  # the share comes back
        return True

    sh._sleep = sleep
    results = sh.run_once()
    assert len(results) == 3 and all(r.copied for r in results)
    assert slept == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert len(_visible(landing)) == 6


class _ReadOnlyFor(FilesystemLanding):
    """The landing store answering EROFS for the first `n` writes (a remounted-read-only share)."""

    def __init__(self, root: Path, n: int) -> None:
        super().__init__(root)
        self.left = n

    def open_writer(self, name: str) -> LandingWriter:
        if self.left > 0:
            self.left -= 1
            raise OSError(errno.EROFS, "Read-only file system")
        return super().open_writer(name)


def test_read_only_landing_is_retried(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    sh = _shipper(logs, landing, ManualClock(), topics=("clicks",))
    sh._landing = _ReadOnlyFor(landing, 4)
    results = sh.run_once()
    assert [r.copied for r in results] == [True, True, True]
    assert sh.failures == 4 and len(_visible(landing)) == 6


def test_rate_limit_holds_within_ten_percent(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    landing = tmp_path / "landing"
    landing.mkdir()
    write_partition(
        logs, "big", 0, segments=2, batches_per_segment=30, records_per_batch=100, codecs=(Compression.NONE,)
    )
    clock = ManualClock()
    rate = 50_000
    sh = _shipper(logs, landing, clock, rate_limit_bytes_per_sec=rate)
    start = clock.monotonic_ms()
    sh.run_once()
    elapsed_s = (clock.monotonic_ms() - start) / 1000
    assert sh.bytes_shipped > 10 * 4096
    achieved = sh.bytes_shipped / elapsed_s
    assert abs(achieved - rate) / rate < 0.10, achieved


def test_old_active_segment_is_rolled_once(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (tmp_path / "landing").mkdir()
    write_partition(logs, "t", 0, segments=1, batches_per_segment=2, records_per_batch=2)
    # make the active segment non-empty: a copy of the first segment's bytes under the next base
    pdir = logs / "t-0"
    active = sorted(pdir.glob("*.log"))[-1]
    active.write_bytes((pdir / "00000000000000000000.log").read_bytes())
    clock = ManualClock(BASE_TS + 10_000)
    sh = _shipper(logs, tmp_path / "landing", clock, max_segment_age_ms=60_000)
    source = sh._source
    assert isinstance(source, DirectorySegmentSource)
    sh.run_once()
    assert source.roll_requests == []
    clock.advance(60_000)
    sh.run_once()
    sh.run_once()
    assert source.roll_requests == [("t", 0)]


def test_vanished_segment_is_skipped(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    sh = _shipper(logs, landing, ManualClock(), topics=("orders",))
    segs = sh.pending()
    os.unlink(segs[0].path)
    result = sh._ship_with_retry(segs[0])
    assert result.manifest is None and sh.is_shipped("orders", 0, 0)


def test_worker_thread_ships_and_stops(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    done = threading.Event()
    shipped: list[int] = []

    def on_shipped(r: ShipResult) -> None:
        shipped.append(r.segment.base_offset)
        if len(shipped) == 6:
            done.set()

    sh = Shipper(
        ShipperConfig(poll_interval_ms=10),
        DirectorySegmentSource([logs]),
        FilesystemLanding(landing),
        logs / CHECKPOINT_FILE,
        on_shipped=on_shipped,
    )
    sh.start()
    try:
        assert done.wait(30)
    finally:
        sh.close()
    assert sh._thread is not None and not sh._thread.is_alive()
    assert sh.segments_shipped == 6 and len(_visible(landing)) == 12
