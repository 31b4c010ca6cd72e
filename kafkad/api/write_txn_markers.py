"""WriteTxnMarkers (27) v0-1: the transaction coordinator of another broker asks this partition leader to
end transactions (COMMIT when `transaction_result` is true, else ABORT). The work is
replication/txn_markers.write_markers, which the local coordinator calls directly; the answer holds an
error code per (producer, topic, partition), after the markers are replicated to the ISR.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.replication.txn_markers import TxnMarker, write_markers


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "markers": [
            {
                "producer_id": m["producer_id"],
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [
                            {"partition_index": i, "error_code": int(code)} for i in t["partition_indexes"]
                        ],
                    }
                    for t in m["topics"]
                ],
            }
            for m in request.body.get("markers") or []
        ]
    }


@handler(ApiKey.WRITE_TXN_MARKERS, 0, 1, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    markers = request.body.get("markers") or []
    results = await write_markers(
        ctx.broker,
        [
            TxnMarker(
                m["producer_id"],
                m["producer_epoch"],
                bool(m["transaction_result"]),
                m["coordinator_epoch"],
                [(t["name"], i) for t in m["topics"] for i in t["partition_indexes"]],
            )
            for m in markers
        ],
    )
    return {
        "markers": [
            {
                "producer_id": m["producer_id"],
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [
                            {
                                "partition_index": i,
                                "error_code": int(
                                    results.get((m["producer_id"], t["name"], i), ErrorCode.NONE)
                                ),
                            }
                            for i in t["partition_indexes"]
                        ],
                    }
                    for t in m["topics"]
                ],
            }
            for m in markers
        ]
    }
