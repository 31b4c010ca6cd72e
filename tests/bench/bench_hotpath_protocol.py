"""Hot-path bench of the codec in CPU time (robust to a busy machine): decode a golden Produce frame,
encode a 100-partition Fetch response with RecordsRef chunks and with inline bytes (v11, and v12: the
flexible version librdkafka picks; Produce likewise at v8 and v10).

    .venv/bin/python -m tests.bench.bench_hotpath_protocol [--runs 7]

Each figure is the per-operation process CPU time of one run (a batch of operations); min/median/max
over --runs runs are printed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from kafkad.protocol import ApiKey, RequestHeader, decode_request, encode_request, encode_response
from tests.unit.protocol.golden import load_golden


@dataclass(frozen=True, slots=True)
class _Slice:
    size: int


def _runs(fn: Callable[[], object], number: int, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        out.append((time.process_time() - t0) / number * 1e6)
    return out


def _line(name: str, values: list[float]) -> None:
    med = statistics.median(values)
    print(f"{name:<52} min {min(values):8.1f}  median {med:8.1f}  max {max(values):8.1f} us/op")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    produce = next(g for g in load_golden() if g.api_key == ApiKey.PRODUCE and g.api_version == 8)
    frame = bytearray(produce.frame)
    partitions = [
        {"partition_index": i, "high_watermark": 1000, "last_stable_offset": 1000, "records": _Slice(4096)}
        for i in range(100)
    ]
    body = {"responses": [{"topic": "bench", "partitions": partitions}]}
    plain = {
        "responses": [{"topic": "bench", "partitions": [dict(p, records=b"x" * 64) for p in partitions]}]
    }
    header = RequestHeader(ApiKey.FETCH, 11, 1, "bench")
    _line(f"decode Produce v8 ({len(frame)} B frame)", _runs(lambda: decode_request(frame), 5000, args.runs))
    # The same body at v10 (flexible), the Produce version librdkafka picks since issue 23.
    v8 = decode_request(bytearray(frame))
    h10 = RequestHeader(ApiKey.PRODUCE, 10, v8.header.correlation_id, v8.header.client_id)
    frame10 = bytearray(encode_request(h10, v8.body)[4:])
    _line(
        f"decode Produce v10 ({len(frame10)} B frame)",
        _runs(lambda: decode_request(frame10), 5000, args.runs),
    )
    _line(
        "encode Fetch v11, 100 partitions, RecordsRef",
        _runs(lambda: encode_response(header, body), 300, args.runs),
    )
    _line(
        "encode Fetch v11, 100 partitions, 64 B bytes",
        _runs(lambda: encode_response(header, plain), 300, args.runs),
    )
    # v12 (flexible: compact lengths, tagged fields) is what librdkafka picks since issue 23.
    header12 = RequestHeader(ApiKey.FETCH, 12, 1, "bench")
    _line(
        "encode Fetch v12, 100 partitions, RecordsRef",
        _runs(lambda: encode_response(header12, body), 300, args.runs),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
