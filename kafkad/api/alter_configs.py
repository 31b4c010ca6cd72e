"""AlterConfigs (33) v0-2: replace a topic's overrides (through the control plane: stored by storage
standalone, ZooKeeper's /config/topics in a cluster) or a broker entity's dynamic configs
(config/dynamic.py: live keys only, others refused as Kafka does)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.api.broker import Broker
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.protocol.config_resources import ResourceType

TOPIC = ResourceType.TOPIC
BROKER = ResourceType.BROKER


async def _alter_broker(broker: Broker, name: str, configs: list[dict[str, Any]], validate: bool) -> None:
    """Legacy AlterConfigs replaces the entity's whole dynamic set (what kafkad-configs --alter sends)."""
    dynamic = broker.dynamic_config
    if dynamic is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "dynamic broker configs are not available")
    new: dict[str, str] = {}
    for c in configs:
        if c["value"] is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for : {c['name']}")
        new[c["name"]] = c["value"]
    await dynamic.replace(dynamic.entity(name), new, validate)


@handler(ApiKey.ALTER_CONFIGS, 0, 2)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    validate_only = bool(request.body.get("validate_only"))
    responses = []
    for res in request.body["resources"]:
        rtype, rname = res["resource_type"], res["resource_name"]
        out: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": rtype,
            "resource_name": rname,
        }
        try:
            if rtype == BROKER:
                await _alter_broker(broker, rname, res["configs"], validate_only)
                responses.append(out)
                continue
            if rtype != TOPIC:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {rtype}")
            await broker.control_plane.alter_topic_configs(
                broker, rname, {c["name"]: c["value"] for c in res["configs"]}, validate_only
            )
        except KafkaError as e:
            out["error_code"], out["error_message"] = int(e.code), e.message or None
        responses.append(out)
    return {"throttle_time_ms": 0, "responses": responses}
