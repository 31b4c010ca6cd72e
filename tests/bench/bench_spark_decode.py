"""Benchmark of the Spark bridge's segment -> Arrow decoder (the `kafkad` data source's hot loop).

    .venv/bin/python -m tests.bench.bench_spark_decode [--runs 5] [--records 200000]

Segments of 1000-record batches of 100-byte values (10-byte keys), per codec, plus a variable-size
variant (values of 60..140 bytes, defeating the uniform-size speculation) and, as the baseline, the
reference per-record decoder (`kafkad.storage.records.decode_batch`). Figures: records per second on
one core (min / median / max of --runs), and the share of time in the serial record walk.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from kafkad.spark_bridge import arrow_decode
from kafkad.storage.records import Compression, SimpleRecord, build_batch, iter_batches

BATCH = 1000


def _segment(total: int, codec: Compression, variable: bool) -> bytes:
    out = []
    for b in range(total // BATCH):
        recs = [
            SimpleRecord(
                b"key-%06d" % i,
                bytes([i % 251]) * ((60 + (i * 37) % 81) if variable else 100),
                (),
                1_700_000_000_000 + b * BATCH + i,
            )
            for i in range(BATCH)
        ]
        out.append(build_batch(recs, compression=codec, base_offset=b * BATCH))
    return b"".join(out)


def _rate(fn: Callable[[], int], runs: int) -> list[float]:
    fn()  # warm-up (imports, caches)
    rates = []
    for _ in range(runs):
        t = time.perf_counter()
        n = fn()
        rates.append(n / (time.perf_counter() - t))
    return rates


def _fmt(rates: list[float]) -> str:
    return " / ".join(f"{r / 1e6:.2f}" for r in (min(rates), statistics.median(rates), max(rates)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    print("M records/s on one core: min / median / max")
    cases = [(c, False) for c in Compression] + [(Compression.NONE, True)]
    for codec, variable in cases:
        seg = _segment(args.records, codec, variable)
        label = f"arrow {codec.name.lower()}{' variable-size' if variable else ''}"

        def arrow(seg: bytes = seg) -> int:
            return sum(rb.num_rows for rb in arrow_decode.decode_segment(seg, "t", 0))

        print(f"{label:32s} {_fmt(_rate(arrow, args.runs))}")
    seg = _segment(args.records // 4, Compression.NONE, False)

    def reference() -> int:
        return sum(len(b.records) for b in iter_batches(seg))

    print(f"{'baseline decode_batch none':32s} {_fmt(_rate(reference, max(1, args.runs // 2)))}")


if __name__ == "__main__":
    main()
