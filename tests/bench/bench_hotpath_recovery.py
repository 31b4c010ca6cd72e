"""Hot-path bench: recovery of an unflushed tail and opening many small partitions, each timed alone.

    .venv/bin/python -m tests.bench.bench_hotpath_recovery [--mib 256] [--partitions 1000] [--runs 5]

1. Recovery: a log of --mib MiB of 16 KiB batches, left unflushed (fds closed without a clean stop),
   then `PartitionLog.open(recover=True)` from recovery point 0, reported in s/GiB of log, wall and
   process CPU. The clean `close()` after it (which fsyncs the dirty pages: disk time, not recovery)
   is timed separately.
2. Open: --partitions one-batch partitions opened sequentially after a clean stop
   (`PartitionLog.open(recover=False)`, what LogManager runs per partition), wall and CPU seconds.
Prints min/median/max over --runs runs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kafkad.clock import SystemClock
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records import SimpleRecord, build_batch
from tests.bench.bench_hotpath_append import batch_of


def summary(name: str, values: list[float], unit: str) -> None:
    med = statistics.median(values)
    print(f"{name:<40} min {min(values):8.3f}  median {med:8.3f}  max {max(values):8.3f} {unit}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="kafkad-recovery-", dir=args.dir))
    clock = SystemClock()
    config = LogConfig()
    results: dict[str, list[float]] = {k: [] for k in ("rec", "rec_cpu", "close", "open", "open_cpu")}
    try:
        log_dir = root / "recover-0"
        log = PartitionLog.open(log_dir, config, clock, recover=False)
        view = memoryview(batch_of(16384))
        now = clock.time_ms()
        for _ in range((args.mib << 20) // len(view)):
            log.append(view, leader_epoch=0, now_ms=now)
        total = log.size_bytes
        log.release()  # a crash: no flush, no snapshot, recovery point 0
        payload = build_batch([SimpleRecord(value=b"x" * 100)])
        dirs = [root / f"small-{i}" for i in range(args.partitions)]
        for d in dirs:
            small = PartitionLog.open(d, config, clock, recover=False)
            small.append(memoryview(bytearray(payload)), leader_epoch=0, now_ms=now)
            small.close()
        for _ in range(args.runs):
            c0, t0 = time.process_time(), time.perf_counter()
            recovered = PartitionLog.open(log_dir, config, clock, recover=True)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            assert recovered.stats.recovered_bytes == total, recovered.stats
            results["rec"].append(wall * (1 << 30) / total)
            results["rec_cpu"].append(cpu * (1 << 30) / total)
            t0 = time.perf_counter()
            recovered.release()  # keep the next run a full recovery (no clean-stop snapshot)
            results["close"].append((time.perf_counter() - t0) * 1000)
            c0, t0 = time.process_time(), time.perf_counter()
            logs = [PartitionLog.open(d, config, clock, recover=False) for d in dirs]
            results["open"].append(time.perf_counter() - t0)
            results["open_cpu"].append(time.process_time() - c0)
            for opened in logs:
                opened.release()
        print(f"recovery of {total >> 20} MiB, open of {args.partitions} partitions, {args.runs} runs")
        summary("recovery (open recover=True), wall", results["rec"], "s/GiB")
        summary("recovery (open recover=True), CPU", results["rec_cpu"], "s/GiB")
        summary("release after recovery", results["close"], "ms")
        summary(f"open {args.partitions} partitions, wall", results["open"], "s")
        summary(f"open {args.partitions} partitions, CPU", results["open_cpu"], "s")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
