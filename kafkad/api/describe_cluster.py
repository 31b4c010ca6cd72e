"""DescribeCluster (60) v0-1: cluster id, controller and live brokers (what the AdminClient's
describe_cluster shows); cluster authorized operations are the full set when asked for (no authorizer).

v1's endpoint type 2 (KRaft controllers) is MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers it.
Standalone the broker is the whole cluster and its own controller. In cluster mode the live brokers and
the controller come from the metadata cache (replication) that UpdateMetadata keeps current. Before the
controller's first UpdateMetadata the answer waits for it as Metadata does (cluster_metadata.py), rather
than naming this broker the whole cluster and its controller; if it does not come the connection is
closed, so the client asks another broker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.cluster.metadata import CACHE_WAIT_S
from kafkad.network.dispatcher import CloseConnection
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.replication.metadata_cache import MetadataCache
from kafkad.security.authorized_operations import cluster_operations


def _cluster_brokers(cache: MetadataCache, listener: str) -> list[dict[str, Any]]:
    out = []
    for b in cache.brokers():
        ep = b.endpoint(listener)
        if ep is not None:
            out.append({"broker_id": b.id, "host": ep.host, "port": ep.port, "rack": b.rack})
    return out


BROKERS = 1
CONTROLLERS = 2


def _error_body(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return _error(code, code.name)


def _error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "error_message": message,
        "endpoint_type": BROKERS,
        "cluster_id": "",
        "controller_id": -1,
        "brokers": [],
    }


@handler(ApiKey.DESCRIBE_CLUSTER, 0, 1, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    endpoint = request.body.get("endpoint_type", BROKERS)
    if endpoint == CONTROLLERS:
        return _error(
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
        )
    if endpoint != BROKERS:
        return _error(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {endpoint}")
    host, port = broker.advertised_host_port()
    controller = broker.broker_id
    brokers = [{"broker_id": broker.broker_id, "host": host, "port": port, "rack": broker.config.server.rack}]
    cache = broker.services.get("metadata_cache") if broker.services.get("cluster") is not None else None
    if isinstance(cache, MetadataCache):
        if not cache.initialized and not await cache.wait_initialized(CACHE_WAIT_S):
            raise CloseConnection(f"no metadata from the controller within {CACHE_WAIT_S:.0f} s")
        controller, brokers = cache.controller_id, _cluster_brokers(cache, ctx.listener)
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": BROKERS,
        "cluster_id": broker.cluster_id,
        "controller_id": controller,
        "brokers": brokers,
        "cluster_authorized_operations": cluster_operations(
            bool(request.body.get("include_cluster_authorized_operations"))
        ),
    }
