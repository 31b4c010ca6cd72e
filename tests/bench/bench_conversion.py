"""Message format v0/v1 conversion cost (issue 23 item 2), in process CPU time per GiB of records, each
against its v2 baseline in the same run:

- append: PartitionLog.append of a v2 batch (the normal Produce path) vs legacy.up_convert of the same
  records as a v1 message set, then that append (Produce v0-2);
- fetch: PartitionLog.read of a stored batch (the zero-copy path: a FileSlice the connection sendfiles)
  vs that read, pread of its bytes and legacy.down_convert to magic 1 (Fetch v2-3).

    .venv/bin/python -m tests.bench.bench_conversion [--runs 5] [--sets 2000] [--records 16] [--value 1024]

Prints min / median / max CPU-s per GiB over --runs runs and the run-by-run ratios.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kafka.record.legacy_records import LegacyRecordBatchBuilder  # type: ignore[import-untyped]

from kafkad.clock import SystemClock
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records import SimpleRecord, build_batch, legacy

GIB = 1 << 30


def summary(name: str, values: list[float], unit: str) -> None:
    med = statistics.median(values)
    print(f"{name:<46} min {min(values):8.2f}  median {med:8.2f}  max {max(values):8.2f} {unit}")


def measure(runs: int, sets: int, records: int, value_size: int) -> dict[str, list[float]]:
    """CPU-s per GiB of record values, per run: v2 append, up-convert + append, zero-copy read,
    down-convert (see the module docstring)."""
    now = int(time.time() * 1000)
    value = b"v" * value_size
    v2 = build_batch([SimpleRecord(None, value, timestamp=now) for _ in range(records)])
    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 24)
    for i in range(records):
        b.append(i, timestamp=now, key=None, value=value)
    v1 = bytes(b.build())
    payload = sets * records * value_size
    root = Path(tempfile.mkdtemp(prefix="kafkad-conversion-"))
    clock = SystemClock()
    rows: dict[str, list[float]] = {
        k: [] for k in ("v2 append", "up-convert + append", "zero-copy read", "down-convert")
    }
    try:
        for run in range(runs):
            for name in ("v2 append", "up-convert + append"):
                log = PartitionLog.open(root / f"{name[:2]}-{run}", LogConfig(), clock, recover=False)
                c0 = time.process_time()
                for _ in range(sets):
                    batch = bytearray(v2) if name == "v2 append" else legacy.up_convert(v1)
                    log.append(memoryview(batch), leader_epoch=0, now_ms=now)
                rows[name].append((time.process_time() - c0) / payload * GIB)
                if name == "v2 append":
                    log.high_watermark = log.log_end_offset
                    reader = log
                else:
                    log.close()
            c0 = time.process_time()
            for i in range(sets):
                reader.read(i * records, len(v2), min_one_batch=True)
            rows["zero-copy read"].append((time.process_time() - c0) / payload * GIB)
            c0 = time.process_time()
            for i in range(sets):
                result = reader.read(i * records, len(v2), min_one_batch=True)
                data = b"".join(s.read() for s in result.slices)
                legacy.down_convert(data, 1, i * records)
            rows["down-convert"].append((time.process_time() - c0) / payload * GIB)
            reader.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sets", type=int, default=2000)
    parser.add_argument("--records", type=int, default=16)
    parser.add_argument("--value", type=int, default=1024)
    args = parser.parse_args(argv)
    rows = measure(args.runs, args.sets, args.records, args.value)
    print(f"{args.sets} sets of {args.records} records of {args.value} B per run, {args.runs} runs")
    for name, values in rows.items():
        summary(name, values, "CPU-s/GiB")
    ratio_up = [u / a for u, a in zip(rows["up-convert + append"], rows["v2 append"], strict=True)]
    ratio_down = [d / z for d, z in zip(rows["down-convert"], rows["zero-copy read"], strict=True)]
    summary("up-convert + append / v2 append", ratio_up, "x")
    summary("down-convert / zero-copy read", ratio_down, "x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
