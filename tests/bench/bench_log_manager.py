"""Bench: LogManager start after a clean stop with many partitions (target: 1,000 partitions <= 1 s).

    .venv/bin/python tests/bench/bench_log_manager.py [--partitions 1000] [--runs 3] [--dirs 2] [--batches 1]

Creates the partitions (each with `--batches` small batches, one topic in 100 with overrides), stops
cleanly, then times `LogManager.load()` per run (each followed by a clean `shutdown()`) and prints
min/median/max of the loads, wall clock and CPU (all threads: steadier on a shared machine). A clean
start checks each active segment's tail (segment_tail.py); `--batches` sizes what that check walks.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kafkad.clock import SystemClock
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_manager import LogManager
from kafkad.storage.log_manager_config import LogManagerConfig


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dirs", type=int, default=2)
    ap.add_argument("--batches", type=int, default=1, help="batches per partition")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-lm-") as tmp:
        config = LogManagerConfig(log_dirs=tuple(str(Path(tmp) / f"d{i}") for i in range(args.dirs)))
        clock = SystemClock()
        lm = LogManager(config, LogConfig(), clock)
        lm.load()
        payload = _one_batch()
        t0 = time.perf_counter()
        for i in range(args.partitions):
            topic = f"bench-{i // 10}"
            overrides = {"retention.ms": "86400000"} if i % 100 == 0 else None  # some topics have overrides
            plog = lm.create_partition(topic, i % 10, overrides)
            for _ in range(args.batches):
                plog.append(memoryview(bytearray(payload)), leader_epoch=0, now_ms=clock.time_ms())
        lm.shutdown()
        print(f"created {args.partitions} partitions in {args.dirs} dirs: {time.perf_counter() - t0:.2f} s")

        loads: list[float] = []
        cpu: list[float] = []
        for _ in range(args.runs):
            lm = LogManager(config, LogConfig(), clock)
            t0, c0 = time.perf_counter(), time.process_time()
            lm.load()
            loads.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            assert lm.load_stats is not None and lm.load_stats.recovered == 0
            assert sum(lm.topics().values()) == args.partitions
            lm.shutdown()
        print(
            f"start after clean stop, {args.partitions} partitions x {args.batches} batches, {args.runs} runs: "
            f"min {min(loads):.3f} s, median {statistics.median(loads):.3f} s, max {max(loads):.3f} s; "
            f"CPU min {min(cpu):.3f} s, median {statistics.median(cpu):.3f} s, max {max(cpu):.3f} s"
        )
    return 0


def _one_batch() -> bytes:
    from kafkad.storage.records import SimpleRecord, build_batch

    return build_batch([SimpleRecord(value=b"x" * 100)])


if __name__ == "__main__":
    raise SystemExit(main())
