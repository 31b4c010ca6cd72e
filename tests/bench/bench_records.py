"""Benchmark of the record batch hot path and the full decoder.

    .venv/bin/python -m tests.bench.bench_records [--runs 7]

- validate+patch: validate_client_batches + patch_offset_and_epoch on one ~16 KiB uncompressed batch
  (the produce path per batch), in microseconds per batch.
- decode: decode_batch of batches of 100-byte-value records, in records per second.
Each figure is measured --runs times; min/median/max are printed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from kafkad.storage.records import (
    Compression,
    SimpleRecord,
    build_batch,
    decode_batch,
    patch_offset_and_epoch,
    validate_client_batches,
)


def _records(count: int, value_size: int) -> list[SimpleRecord]:
    return [
        SimpleRecord(b"key-%06d" % i, bytes([i % 251]) * value_size, (), 1_700_000_000_000 + i)
        for i in range(count)
    ]


def _time_per_call(fn: Callable[[], object], loops: int) -> float:
    start = time.perf_counter()
    for _ in range(loops):
        fn()
    return (time.perf_counter() - start) / loops


def _summary(name: str, unit: str, values: list[float]) -> str:
    return (
        f"{name}: min {min(values):,.2f} median {statistics.median(values):,.2f} "
        f"max {max(values):,.2f} {unit} ({len(values)} runs)"
    )


def bench_validate_patch(runs: int, loops: int = 5000) -> list[float]:
    batch = bytearray(build_batch(_records(140, 100)))  # 140 x ~117 bytes: just over 16 KiB
    assert 16_000 <= len(batch) <= 17_000, len(batch)
    view = memoryview(batch)

    def step() -> None:
        for header in validate_client_batches(view):
            patch_offset_and_epoch(view, header.position, 12345, 3)

    return [_time_per_call(step, loops) * 1e6 for _ in range(runs)]


def bench_decode(runs: int, codec: Compression, loops: int = 50) -> list[float]:
    count = 500
    batch = build_batch(_records(count, 100), compression=codec)
    return [count / _time_per_call(lambda: decode_batch(batch), loops) for _ in range(runs)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    print(_summary("validate+patch 16 KiB batch", "us/batch", bench_validate_patch(args.runs)))
    for codec in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
        values = bench_decode(args.runs, codec)
        print(_summary(f"decode 100-byte records, {codec.name}", "records/s", values))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
