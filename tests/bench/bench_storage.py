"""Storage micro-benchmarks (a script, not a pytest test).

    .venv/bin/python tests/bench/bench_storage.py [--mib 256] [--runs 3]

1. append of 16 KiB batches through PartitionLog.append vs a raw os.write of the same bytes (same run),
   and the same for an idempotent producer (distinct sequences, so every batch goes through the
   producer-state checks; at most 2048 batches, prepared before the clock starts);
2. random offset lookup: OffsetIndex.lookup over a 1 GiB segment's worth of entries (262144), and the
   full PartitionLog.read path (index + header scan + FileSlice) on the benchmark log;
3. recovery of an unflushed tail (open with recover=True from recovery point 0), reported as s/GiB;
4. reopen after a clean stop.
Prints min/median/max over the runs.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkad.clock import SystemClock
from kafkad.storage.log_config import LogConfig
from kafkad.storage.offset_index import OffsetIndex
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records.batch import rewrite_crc

BATCH = 16 * 1024


def batch_of(size: int, producer_id: int = -1) -> bytearray:
    epoch, seq = (0, 0) if producer_id >= 0 else (-1, -1)
    builder = DefaultRecordBatchBuilder(2, 0, 0, producer_id, epoch, seq, 1 << 30)
    builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v" * (size - 61 - 12), headers=[])
    return bytearray(builder.build())


def idempotent_batches(size: int, n: int) -> list[memoryview]:
    """`n` batches of one producer with consecutive sequences (baseSequence at byte 53, CRC redone)."""
    template = batch_of(size, producer_id=1)
    out = []
    for seq in range(n):
        buf = bytearray(template)
        buf[53:57] = seq.to_bytes(4, "big")
        rewrite_crc(buf, 0)
        out.append(memoryview(buf))
    return out


def append_idempotent(
    root: Path, run: int, config: LogConfig, clock: SystemClock, size: int
) -> tuple[float, float]:
    """(raw os.write, PartitionLog.append) seconds per batch for distinct idempotent batches."""
    views = idempotent_batches(size, 2048)
    fd = os.open(root / f"raw-idem-{run}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    t0 = time.perf_counter()
    for view in views:
        os.write(fd, view)
    t_raw = (time.perf_counter() - t0) / len(views)
    os.close(fd)
    os.unlink(root / f"raw-idem-{run}")
    log = PartitionLog.open(root / f"idem-{run}", config, clock, recover=False)
    now = clock.time_ms()
    t0 = time.perf_counter()
    for view in views:
        log.append(view, leader_epoch=0, now_ms=now)
    t_log = (time.perf_counter() - t0) / len(views)
    assert log.log_end_offset == len(views)
    log.release()
    shutil.rmtree(root / f"idem-{run}")
    return t_raw, t_log


def summary(name: str, values: list[float], unit: str) -> None:
    print(
        f"{name:<44} min {min(values):10.3f}  median {statistics.median(values):10.3f}  max {max(values):10.3f} {unit}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    total = args.mib << 20
    root = Path(tempfile.mkdtemp(prefix="kafkad-bench-", dir=args.dir))
    clock = SystemClock()
    config = LogConfig()  # 1 GiB segments: the whole run lands in one segment
    batch = batch_of(BATCH)
    n = total // len(batch)
    results: dict[str, list[float]] = {
        k: []
        for k in (
            "raw",
            "log",
            "over",
            "ratio",
            "idem_over",
            "idem_ratio",
            "idx",
            "read",
            "recover",
            "reopen",
        )
    }
    try:
        for run in range(args.runs):
            # 1. raw os.write baseline vs PartitionLog.append of the same bytes
            raw_path = root / f"raw-{run}"
            fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            view = memoryview(batch)
            t0 = time.perf_counter()
            for _ in range(n):
                os.write(fd, view)
            t_raw = time.perf_counter() - t0
            os.close(fd)
            raw_path.unlink()
            log_dir = root / f"bench-{run}"
            log = PartitionLog.open(log_dir, config, clock, recover=False)
            now = clock.time_ms()
            t0 = time.perf_counter()
            for _ in range(n):
                log.append(view, leader_epoch=0, now_ms=now)
            t_log = time.perf_counter() - t0
            results["raw"].append(total / t_raw / 1e9)
            results["log"].append(total / t_log / 1e9)
            results["over"].append((t_log - t_raw) / n * 1e6)
            results["ratio"].append(t_raw / t_log)
            i_raw, i_log = append_idempotent(root, run, config, clock, len(batch))
            results["idem_over"].append((i_log - i_raw) * 1e6)
            results["idem_ratio"].append(i_raw / i_log)
            # 2. lookups
            index = OffsetIndex(root / f"{run}.index", 0, 10 << 20)
            for i in range(1, 262145):
                index.append(i * 4, i * 4096)
            probes = [random.randrange(0, 262144 * 4) for _ in range(20000)]
            t0 = time.perf_counter()
            for p in probes:
                index.lookup(p)
            results["idx"].append((time.perf_counter() - t0) / len(probes) * 1e6)
            index.close()
            leo = log.log_end_offset
            offsets = [random.randrange(0, leo) for _ in range(20000)]
            t0 = time.perf_counter()
            for o in offsets:
                log.read(o, 1 << 20)
            results["read"].append((time.perf_counter() - t0) / len(offsets) * 1e6)
            # 3. recovery of the whole unflushed log (crash: never closed, recovery point 0)
            t0 = time.perf_counter()
            PartitionLog.open(log_dir, config, clock, recover=True).close()
            results["recover"].append((time.perf_counter() - t0) * (1 << 30) / total)
            # 4. reopen after the clean stop above
            t0 = time.perf_counter()
            reopened = PartitionLog.open(log_dir, config, clock, recover=False)
            results["reopen"].append((time.perf_counter() - t0) * 1000)
            reopened.close()
            for seg in log.segments:
                seg.close()
            shutil.rmtree(log_dir)
        print(f"{args.mib} MiB of {len(batch)}-byte batches ({n} appends), {args.runs} runs, dir {root}")
        summary("raw os.write", results["raw"], "GB/s")
        summary("PartitionLog.append", results["log"], "GB/s")
        summary("append Python overhead per batch", results["over"], "us")
        summary("append speed / raw os.write speed", results["ratio"], "")
        summary("idempotent append overhead per batch", results["idem_over"], "us")
        summary("idempotent append speed / raw speed", results["idem_ratio"], "")
        summary("OffsetIndex.lookup, 262144 entries (1 GiB)", results["idx"], "us")
        summary("PartitionLog.read random offset", results["read"], "us")
        summary("recovery (recover=True), scaled", results["recover"], "s/GiB")
        summary("reopen after clean stop", results["reopen"], "ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
