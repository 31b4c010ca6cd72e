"""Codec cost of small requests in CPU time: decode the request frame, then encode its response.

    .venv/bin/python -m tests.bench.bench_hotpath_small [--runs 7] [--number 20000]

Three shapes the small-request profiles are made of: a one-record Produce v8, a one-partition
OffsetCommit v7 and a Heartbeat v3 (all non-flexible, the versions librdkafka sends). Each operation is
decode_request(frame) + encode_response(header, body); each figure is the per-operation process CPU time
of one run (a batch of `number` operations); min/median/max over --runs runs are printed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from kafkad.protocol import ApiKey, RequestHeader, decode_request, encode_request, encode_response

# A one-record v2 batch is ~80 bytes; the decoder keeps records as a memoryview, so content is irrelevant.
_RECORDS = bytes(range(80))


def _case(
    api_key: int, version: int, request: dict[str, Any], response: dict[str, Any]
) -> Callable[[], object]:
    header = RequestHeader(api_key, version, 7, "rdkafka")
    frame = bytearray(encode_request(header, request)[4:])

    def op() -> object:
        req = decode_request(frame)
        return encode_response(req.header, response)

    op()  # fail early on a schema mismatch
    return op


def cases() -> dict[str, Callable[[], object]]:
    produce = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "bench", "partition_data": [{"index": 3, "records": _RECORDS}]}],
    }
    produce_resp = {
        "responses": [
            {
                "name": "bench",
                "partition_responses": [
                    {
                        "index": 3,
                        "error_code": 0,
                        "base_offset": 12345,
                        "log_start_offset": 0,
                        "record_errors": [],
                    }
                ],
            }
        ],
        "throttle_time_ms": 0,
    }
    commit = {
        "group_id": "bench-group",
        "generation_id_or_member_epoch": 5,
        "member_id": "rdkafka-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        "group_instance_id": None,
        "topics": [
            {
                "name": "bench",
                "partitions": [
                    {
                        "partition_index": 3,
                        "committed_offset": 12345,
                        "committed_leader_epoch": 0,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    commit_resp = {
        "throttle_time_ms": 0,
        "topics": [{"name": "bench", "partitions": [{"partition_index": 3, "error_code": 0}]}],
    }
    heartbeat = {
        "group_id": "bench-group",
        "generation_id": 5,
        "member_id": "rdkafka-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        "group_instance_id": None,
    }
    heartbeat_resp = {"throttle_time_ms": 0, "error_code": 0}
    return {
        "Produce v8, one record": _case(ApiKey.PRODUCE, 8, produce, produce_resp),
        "OffsetCommit v7, one partition": _case(ApiKey.OFFSET_COMMIT, 7, commit, commit_resp),
        "Heartbeat v3": _case(ApiKey.HEARTBEAT, 3, heartbeat, heartbeat_resp),
    }


def _runs(fn: Callable[[], object], number: int, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        out.append((time.process_time() - t0) / number * 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args(argv)
    for name, op in cases().items():
        v = _runs(op, args.number, max(5, args.runs))
        med = statistics.median(v)
        print(f"decode+encode {name:<32} min {min(v):6.2f}  median {med:6.2f}  max {max(v):6.2f} us/op")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
