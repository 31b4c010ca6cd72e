"""The shipper over real storage PartitionLogs (the daemon's source), through an event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

from kafkad.clock import ManualClock
from kafkad.spark_bridge.landing import FilesystemLanding
from kafkad.spark_bridge.manifest import Manifest
from kafkad.spark_bridge.position import LocalPositionStore
from kafkad.spark_bridge.segment_source import LogManagerSegmentSource
from kafkad.spark_bridge.shipper import Shipper, ShipperConfig
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records import Compression, SimpleRecord, build_batch

T0 = 1_700_000_000_000


class _Manager:
    def __init__(self, *logs: PartitionLog) -> None:
        self._logs = list(logs)

    def logs(self) -> Iterator[PartitionLog]:
        return iter(list(self._logs))


def _produce(plog: PartitionLog, clock: ManualClock, n: int) -> None:
    for i in range(n):
        recs = [SimpleRecord(key=b"k%d" % i, value=b"v" * 50, timestamp=clock.time_ms()) for _ in range(10)]
        plog.append(
            memoryview(
                bytearray(build_batch(recs, compression=Compression.NONE if i % 2 else Compression.LZ4))
            ),
            leader_epoch=0,
            now_ms=clock.time_ms(),
        )
        plog.high_watermark = plog.log_end_offset  # as the standalone Partition does after each append


def test_ships_rolled_segments_of_a_real_partition_log_via_the_loop(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    plog = PartitionLog.open(
        tmp_path / "logs" / "events-0",
        LogConfig().with_overrides({"segment.bytes": "4096"}),
        clock,
        recover=False,
    )
    _produce(plog, clock, 30)
    assert plog.segment_count > 2
    landing = tmp_path / "landing"
    landing.mkdir()

    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()
    try:
        source = LogManagerSegmentSource(_Manager(plog), loop)
        shipper = Shipper(
            ShipperConfig(site="s", max_segment_age_ms=60_000),
            source,
            FilesystemLanding(landing),
            LocalPositionStore.in_dir(tmp_path / "logs"),
            clock=clock,
        )
        results = shipper.run_once()
        closed = plog.segment_count - 1
        assert len(results) == closed and all(r.copied for r in results)
        total = sum(Manifest.from_json(p.read_bytes()).record_count for p in landing.rglob("*.manifest.json"))
        assert total == plog.active_segment.base_offset  # every record before the active segment

        # an old active segment gets rolled (on the loop), then shipped on the next pass
        active_base = plog.active_segment.base_offset
        assert plog.active_segment.size > 0
        clock.advance(61_000)
        shipper.run_once()
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(60)  # let the roll run
        assert plog.active_segment.base_offset == plog.log_end_offset > active_base
        assert [r.segment.base_offset for r in shipper.run_once()] == [active_base]
        assert shipper.is_shipped("events", 0, active_base)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(10)
        loop.close()
