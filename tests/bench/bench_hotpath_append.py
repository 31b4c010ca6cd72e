"""Hot-path bench: per-batch cost of PartitionLog.append and of validate+patch, next to a raw os.write.

    .venv/bin/python -m tests.bench.bench_hotpath_append [--runs 7] [--batches 4000] [--size 16384]

Each run writes `--batches` batches of `--size` bytes three ways into fresh files of one directory:
raw os.write of the same bytes (the floor), PartitionLog.append (one batch per call, as a produce
request with one partition), and validate_client_batches + patch_offset_and_epoch alone (no I/O).
The runs alternate raw and log writes so a noisy neighbour hits both alike. Prints min/median/max of
GB/s (wall clock) and of the overhead per batch (append minus raw write) in wall and in process CPU
time (user + system: a busy machine inflates it far less than wall time).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kafkad.clock import SystemClock
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records import (
    SimpleRecord,
    build_batch,
    patch_offset_and_epoch,
    validate_client_batches,
)


def batch_of(size: int) -> bytearray:
    """One uncompressed batch of exactly `size` bytes (one record), timestamped now."""
    now = int(time.time() * 1000)
    value_len = size - 61 - 12
    while True:
        batch = build_batch([SimpleRecord(value=b"v" * value_len, timestamp=now)])
        if len(batch) == size:
            return bytearray(batch)
        value_len += size - len(batch)


def summary(name: str, values: list[float], unit: str) -> None:
    med = statistics.median(values)
    print(f"{name:<40} min {min(values):9.2f}  median {med:9.2f}  max {max(values):9.2f} {unit}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--batches", type=int, default=4000)
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="kafkad-hotpath-", dir=args.dir))
    clock = SystemClock()
    batch = batch_of(args.size)
    view = memoryview(batch)
    n, total = args.batches, args.batches * len(batch)
    raw_gbs: list[float] = []
    log_gbs: list[float] = []
    over_us: list[float] = []
    vp_us: list[float] = []
    over_cpu_us: list[float] = []
    raw_cpu_us: list[float] = []
    try:
        for run in range(args.runs):
            fd = os.open(root / f"raw-{run}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                os.write(fd, view)
            t_raw, c_raw = time.perf_counter() - t0, time.process_time() - c0
            os.close(fd)
            log = PartitionLog.open(root / f"bench-{run}", LogConfig(), clock, recover=False)
            now = clock.time_ms()
            append = log.append
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                append(view, leader_epoch=0, now_ms=now)
            t_log, c_log = time.perf_counter() - t0, time.process_time() - c0
            log.close()
            c0 = time.process_time()
            for _ in range(n):
                for header in validate_client_batches(view):
                    patch_offset_and_epoch(view, header.position, 12345, 3)
            c_vp = time.process_time() - c0
            raw_gbs.append(total / t_raw / 1e9)
            log_gbs.append(total / t_log / 1e9)
            over_us.append((t_log - t_raw) / n * 1e6)
            over_cpu_us.append((c_log - c_raw) / n * 1e6)
            raw_cpu_us.append(c_raw / n * 1e6)
            vp_us.append(c_vp / n * 1e6)
            shutil.rmtree(root / f"bench-{run}")
            os.unlink(root / f"raw-{run}")
        print(f"{n} batches of {len(batch)} bytes per run, {args.runs} runs")
        summary("raw os.write", raw_gbs, "GB/s")
        summary("PartitionLog.append", log_gbs, "GB/s")
        summary("append overhead per batch (wall)", over_us, "us")
        summary("raw os.write per batch (CPU)", raw_cpu_us, "us")
        summary("append overhead per batch (CPU)", over_cpu_us, "us")
        summary("validate+patch per batch (CPU, no I/O)", vp_us, "us")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
