from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.spark_bridge.landing import FilesystemLanding, LandingWriter
from kafkad.spark_bridge.manifest import Manifest
from kafkad.spark_bridge.position import LEGACY_CHECKPOINT_FILE, POSITIONS_FILE, LocalPositionStore
from kafkad.spark_bridge.rate_limit import Backoff
from kafkad.spark_bridge.segment_source import ClosedSegment, DirectorySegmentSource
from kafkad.spark_bridge.shipper import Shipper, ShipperConfig, ShipResult
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

    kw.setdefault("site", SITE)
    cfg = ShipperConfig(**kw)  # type: ignore[arg-type]
    sh = Shipper(
        cfg,
        DirectorySegmentSource([logs]),
        FilesystemLanding(landing),
        LocalPositionStore.in_dir(logs),
        clock=clock,
        sleep=sleep,
    )
    sh.slept = slept  # type: ignore[attr-defined]
    return sh


SITE = "paris"


def _obj(topic: str, first: int, last: int, suffix: str = ".log", site: str = SITE) -> str:
    """Relative name of a shipped object of partition 0 (each factory segment: 16 offsets)."""
    return f"site={site}/{topic}/0/{first:020d}-{last:020d}{suffix}"


def _visible(landing: Path) -> list[str]:
    return sorted(str(p.relative_to(landing)) for p in landing.rglob("*") if p.is_file())


def test_ships_closed_segments_with_manifest_and_checkpoint(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    sh = _shipper(logs, landing, ManualClock())
    results = sh.run_once()
    # 3 closed segments each of orders and clicks; internal topic and active segments excluded
    assert len(results) == 6 and all(r.copied for r in results)
    files = _visible(landing)
    assert _obj("orders", 0, 15) in files
    assert not any("__consumer_offsets" in f or f.startswith(".") or "/." in f for f in files)
    assert len(files) == 12
    src = (logs / "orders-0" / "00000000000000000000.log").read_bytes()
    assert (landing / _obj("orders", 0, 15)).read_bytes() == src
    m = Manifest.from_json((landing / _obj("orders", 0, 15, ".manifest.json")).read_bytes())
    assert m.record_count == 15 and m.batch_count == 4 and m.size == len(src)
    assert m.last_offset == sum(len(b.records) for b in iter_batches(src)) - 1 == 15
    assert m.first_timestamp == BASE_TS
    assert (m.site, m.cluster_id) == (SITE, None)
    assert sh.is_shipped("orders", 0, 16) and sh.is_shipped("orders", 0, 32)
    assert not sh.is_shipped("orders", 0, 48)  # the active segment
    # positions are offsets: the next one to ship, per partition
    assert (logs / POSITIONS_FILE).read_text() == "0\n2\nclicks 0 48\norders 0 48\n"
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
    assert files == [_obj("orders", 0, 15), _obj("orders", 0, 15, ".manifest.json")]
    sh2 = _shipper(logs, landing, ManualClock(), topics=("orders",))
    results = sh2.run_once()
    assert [(r.segment.base_offset, r.copied) for r in results] == [(16, True), (32, True)]
    assert len(_visible(landing)) == 6


def test_landed_but_not_checkpointed_is_not_copied_again(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    _shipper(logs, landing, ManualClock(), topics=("orders",)).run_once()
    (logs / POSITIONS_FILE).unlink()
    mtime = (landing / _obj("orders", 0, 15)).stat().st_mtime_ns
    results = _shipper(logs, landing, ManualClock(), topics=("orders",)).run_once()
    assert len(results) == 3 and not any(r.copied for r in results)
    assert (landing / _obj("orders", 0, 15)).stat().st_mtime_ns == mtime


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


def _big_partition(tmp_path: Path) -> tuple[Path, Path]:
    logs = tmp_path / "logs"
    landing = tmp_path / "landing"
    landing.mkdir()
    write_partition(
        logs, "big", 0, segments=2, batches_per_segment=30, records_per_batch=100, codecs=(Compression.NONE,)
    )
    return logs, landing


def test_rate_limit_holds_within_ten_percent(tmp_path: Path) -> None:
    logs, landing = _big_partition(tmp_path)
    clock = ManualClock()
    rate = 50_000
    sh = _shipper(logs, landing, clock, rate_limit_bytes_per_sec=rate)
    start = clock.monotonic_ms()
    sh.run_once()
    elapsed_s = (clock.monotonic_ms() - start) / 1000
    assert sh.bytes_shipped > 10 * 4096
    achieved = sh.bytes_shipped / elapsed_s
    assert abs(achieved - rate) / rate < 0.10, achieved


def test_rate_limit_changes_live(tmp_path: Path) -> None:
    """A dynamic broker config (bridge.rate.limit.bytes.per.sec) reaches a running shipper: unlimited ->
    a cap that the next copy holds -> unlimited again."""
    logs, landing = _big_partition(tmp_path)
    clock = ManualClock()
    sh = _shipper(logs, landing, clock)
    rate = 50_000
    sh.set_rate_limit(rate)
    assert sh.config.rate_limit_bytes_per_sec == rate
    start = clock.monotonic_ms()
    sh.run_once()
    achieved = sh.bytes_shipped / ((clock.monotonic_ms() - start) / 1000)
    assert sh.bytes_shipped > 10 * 4096 and abs(achieved - rate) / rate < 0.10, achieved
    sh.set_rate_limit(-1)
    assert sh._bucket is None


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
        ShipperConfig(site=SITE, poll_interval_ms=10),
        DirectorySegmentSource([logs]),
        FilesystemLanding(landing),
        LocalPositionStore.in_dir(logs),
        on_shipped=on_shipped,
    )
    sh.start()
    try:
        assert done.wait(30)
    finally:
        sh.close()
    assert sh._thread is not None and not sh._thread.is_alive()
    assert sh.segments_shipped == 6 and len(_visible(landing)) == 12


def test_ships_from_the_first_batch_past_the_stored_offset(tmp_path: Path) -> None:
    """A position inside a segment (another broker shipped up to it under other boundaries)."""
    logs, landing = _setup(tmp_path)
    LocalPositionStore.in_dir(logs).advance("orders", 0, 8)  # batches: 0-4, 5 (control), 6-10, 11-15
    results = _shipper(logs, landing, ManualClock(), topics=("orders",)).run_once()
    assert [r.manifest.base_offset for r in results if r.manifest] == [6, 16, 32]
    assert _visible(landing)[:2] == [_obj("orders", 6, 15), _obj("orders", 6, 15, ".manifest.json")]
    src = (logs / "orders-0" / "00000000000000000000.log").read_bytes()
    tail = (landing / _obj("orders", 6, 15)).read_bytes()
    assert src.endswith(tail) and 0 < len(tail) < len(src)
    assert [b.records[0].offset for b in iter_batches(tail)] == [6, 11]


def test_old_segment_checkpoint_becomes_an_offset(tmp_path: Path) -> None:
    """A log dir shipped by an older kafkad: `topic partition last-shipped-base` -> the next base."""
    logs, landing = _setup(tmp_path)
    (logs / LEGACY_CHECKPOINT_FILE).write_text("0\n1\norders 0 16\n")
    sh = _shipper(logs, landing, ManualClock(), topics=("orders",))
    results = sh.run_once()
    assert [r.segment.base_offset for r in results] == [32]
    assert (logs / POSITIONS_FILE).read_text() == "0\n1\norders 0 48\n"
    assert not (logs / LEGACY_CHECKPOINT_FILE).exists()
    assert sh.is_shipped("orders", 0, 0) and sh.is_shipped("orders", 0, 16)


def test_two_sites_with_the_same_topic_share_one_landing(tmp_path: Path) -> None:
    logs, landing = _setup(tmp_path)
    other = tmp_path / "other"
    write_partition(other, "orders", 0, segments=2, batches_per_segment=4, records_per_batch=5)
    _shipper(logs, landing, ManualClock(), topics=("orders",)).run_once()
    sh = _shipper(other, landing, ManualClock(), topics=("orders",), site="lyon", cluster_id="c-lyon")
    assert len(sh.run_once()) == 2
    files = _visible(landing)
    assert len([f for f in files if f.startswith("site=paris/")]) == 6
    assert [f for f in files if f.startswith("site=lyon/") and "_cluster_id" not in f] == [
        _obj("orders", 0, 15, ".log", "lyon"),
        _obj("orders", 0, 15, ".manifest.json", "lyon"),
        _obj("orders", 16, 31, ".log", "lyon"),
        _obj("orders", 16, 31, ".manifest.json", "lyon"),
    ]
    m = Manifest.from_json((landing / _obj("orders", 16, 31, ".manifest.json", "lyon")).read_bytes())
    assert (m.site, m.cluster_id) == ("lyon", "c-lyon")
    assert (landing / "site=lyon" / "_cluster_id").read_text() == "c-lyon"
    # another cluster given the same site name ships nothing (its offsets would collide with lyon's)
    third = tmp_path / "third"
    write_partition(third, "orders", 0, segments=2, batches_per_segment=4, records_per_batch=5)
    clash = _shipper(third, landing, ManualClock(), topics=("orders",), site="lyon", cluster_id="c-other")
    assert clash.run_once() == [] and clash.failures == 1
    assert len(_visible(landing)) == 6 + 4 + 1
    with pytest.raises(ValueError):
        ShipperConfig(site="../etc")


def test_backoff_after_a_long_outage_stays_at_its_maximum() -> None:
    """A landing down for hours fails thousands of times in a row: the delay stays max_ms (a float power
    of the failure count overflowed after ~1,000 failures and killed the shipper's retry loop)."""
    backoff = Backoff(100, 30_000)
    assert [backoff.delay_ms(n) for n in (1, 2, 3)] == [100, 200, 400]
    assert backoff.delay_ms(1025) == backoff.delay_ms(10**9) == 30_000
