"""Micro-benchmark of the codec's hot path: decode a golden Produce frame, encode a 100-partition Fetch.

Run: .venv/bin/python -m tests.bench.bench_protocol
"""

from __future__ import annotations

import timeit
from dataclasses import dataclass

from kafkad.protocol import ApiKey, RequestHeader, decode_request, encode_response
from tests.unit.protocol.golden import load_golden


@dataclass(frozen=True, slots=True)
class _Slice:
    size: int


def _per_op_us(fn: object, number: int) -> float:
    best = min(timeit.repeat(fn, number=number, repeat=5))  # type: ignore[arg-type]
    return best / number * 1e6


def main() -> None:
    produce = next(g for g in load_golden() if g.api_key == ApiKey.PRODUCE and g.api_version == 8)
    frame = bytearray(produce.frame)
    decode_us = _per_op_us(lambda: decode_request(frame), 20000)

    partitions = [
        {"partition_index": i, "high_watermark": 1000, "last_stable_offset": 1000, "records": _Slice(4096)}
        for i in range(100)
    ]
    body = {"responses": [{"topic": "bench", "partitions": partitions}]}
    header = RequestHeader(ApiKey.FETCH, 11, 1, "bench")
    chunks = encode_response(header, body)
    encode_us = _per_op_us(lambda: encode_response(header, body), 2000)
    plain = {
        "responses": [{"topic": "bench", "partitions": [dict(p, records=b"x" * 64) for p in partitions]}]
    }
    encode_bytes_us = _per_op_us(lambda: encode_response(header, plain), 2000)

    print(f"decode Produce v8 ({len(frame)} B frame): {decode_us:.1f} us/op")
    print(f"encode Fetch v11, 100 partitions, RecordsRef ({len(chunks)} chunks): {encode_us:.1f} us/op")
    print(f"encode Fetch v11, 100 partitions, 64 B bytes records: {encode_bytes_us:.1f} us/op")


if __name__ == "__main__":
    main()
