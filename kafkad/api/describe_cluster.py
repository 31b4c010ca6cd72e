"""DescribeCluster (60) v0-1: cluster id, controller and live brokers (what the AdminClient's
describe_cluster shows); cluster authorized operations are the full set when asked for (no authorizer).

v1's endpoint type 2 (KRaft controllers) is MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers it.
The control plane names the controller and the live brokers: standalone the broker is the whole cluster
and its own controller; in ZooKeeper mode they come from the metadata cache UpdateMetadata keeps current
(waiting for the controller's first one, cluster/zookeeper.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.security.authorized_operations import cluster_operations

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
    controller, brokers = await broker.control_plane.describe_cluster(ctx)
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
