"""FindCoordinator (10) v0-6: the control plane places groups and transactional ids (standalone: this broker
coordinates every group and transactional id; ZooKeeper mode: the leader of the key's __consumer_offsets
partition, cluster/metadata.py, or of the transactional id's __transaction_state partition, key type 1:
coordinator/transaction/service.py).
v4+ (KIP-699) look up a batch of keys, each answered in its own `coordinators` entry with its own error.

The first lookup creates __consumer_offsets (as Kafka does) and is answered once it exists, rather
than with COORDINATOR_NOT_AVAILABLE: the creation yields to the loop between partitions, so waiting
for it here costs other connections nothing and spares the client a retry round (librdkafka waits
up to a second before asking again). Concurrent lookups wait for the same creation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


def _error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "error_message": message,
        "node_id": -1,
        "host": "",
        "port": -1,
    }


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    body = _error(code, code.name)
    keys = request.body.get("coordinator_keys") or []  # v4+
    body["coordinators"] = [dict(_error(code, code.name), key=k) for k in keys]
    return body


@handler(ApiKey.FIND_COORDINATOR, 0, 6, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    key_type = request.body.get("key_type", KEY_TYPE_GROUP)
    if ctx.version < 4:
        return await _lookup(ctx, key_type, request.body["key"])
    coordinators = []
    for key in request.body["coordinator_keys"] or []:
        try:
            found = dict(await _lookup(ctx, key_type, key))
        except KafkaError as e:
            found = _error(e.code, e.code.name)
        found["key"] = key
        coordinators.append(found)
    return {"throttle_time_ms": 0, "coordinators": coordinators}


async def _lookup(ctx: RequestContext, key_type: int, key: str) -> Mapping[str, Any]:
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        return _error(ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    broker = ctx.broker
    if broker.stopping:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the broker is shutting down")
    if key_type == KEY_TYPE_TRANSACTION:
        if not key:
            return _error(ErrorCode.INVALID_REQUEST, "the transactional id is empty")
        node, host, port = await broker.control_plane.find_transaction_coordinator(ctx, key)
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": "NONE",
            "node_id": node,
            "host": host,
            "port": port,
        }
    return await broker.control_plane.find_coordinator(ctx, key)  # KafkaError -> the error body
