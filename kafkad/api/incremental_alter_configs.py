"""IncrementalAlterConfigs (44) v0-1: SET / DELETE / APPEND / SUBTRACT single config keys (what
kafka-configs and AdminClient.incremental_alter_configs send since Kafka 2.3).

Topic resources: the operations apply to the topic's current overrides in order; APPEND and SUBTRACT take
list keys only (cleanup.policy) and start from the effective value (the broker default when not overridden),
as Kafka's ConfigAdminManager does. The result is validated whole before anything is written.
The control plane reads the current overrides and replaces them with the result (standalone: storage's
LogManager overrides; cluster mode: ZooKeeper's /config/topics); nothing is written when nothing changes.
Broker resources ("" = the cluster-wide default, or this broker's id) change the dynamic broker configs
(config/dynamic.py): the live keys only, applied at once, and Kafka's dynamic names kafkad only
stores (config_keys/kafka_only.py); others are refused as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum
from typing import Any

from kafkad.api.broker import Broker
from kafkad.config.defs import ConfigType as BrokerConfigType
from kafkad.config.dynamic import DEFAULT_ENTITY
from kafkad.config.keys.kafka_only import KAFKA_ONLY_KEYS
from kafkad.config.table import KEYS_BY_NAME
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.protocol.config_resources import ResourceType
from kafkad.storage.log_config import TOPIC_CONFIGS, ConfigType


class OpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def apply_ops(
    current: Mapping[str, str],
    effective: Mapping[str, str],
    ops: Sequence[Mapping[str, Any]],
    is_list: Any,
) -> dict[str, str | None]:
    """The changed keys (None: override removed) after `ops` on `current` overrides; `effective` gives the
    value APPEND/SUBTRACT start from when a key is not overridden. Raises KafkaError as Kafka does."""
    seen: set[str] = set()
    changes: dict[str, str | None] = {}
    for c in ops:
        name, value = c["name"], c["value"]
        if name in seen:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {name}")
        seen.add(name)
        try:
            op = OpType(c["config_operation"])
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"unknown config operation {c['config_operation']}"
            ) from None
        if op is not OpType.DELETE and value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for : {name}")
        if op is OpType.SET:
            changes[name] = value
        elif op is OpType.DELETE:
            changes[name] = None
        else:
            if not is_list(name):
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value append/subtract is not allowed for config key: {name}",
                )
            base = current.get(name, effective.get(name, ""))
            items = [i.strip() for i in (base or "").split(",") if i.strip()]
            given = [i.strip() for i in value.split(",") if i.strip()]
            if op is OpType.APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            changes[name] = ",".join(items)
    return changes


def merged(current: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    out = dict(current)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def _topic_is_list(name: str) -> bool:
    defn = TOPIC_CONFIGS.get(name)
    return defn is not None and defn.type is ConfigType.LIST


async def _alter_topic(broker: Broker, topic: str, ops: Sequence[Mapping[str, Any]], validate: bool) -> None:
    lm = broker.log_manager
    plane = broker.control_plane
    current = await plane.topic_configs(broker, topic)
    effective = {k: v for k, v, _ in lm.default_log_config.describe()}
    changes = apply_ops(current, effective, ops, _topic_is_list)
    for k, v in changes.items():
        if v is None and k not in TOPIC_CONFIGS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{k}: unknown topic config")
    new = merged(current, changes)
    lm.default_log_config.with_overrides(new)  # INVALID_CONFIG naming the key
    await plane.alter_topic_configs(broker, topic, new, validate or not changes)


async def _alter_broker(broker: Broker, name: str, ops: Sequence[Mapping[str, Any]], validate: bool) -> None:
    dynamic = broker.dynamic_config
    if dynamic is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "dynamic broker configs are not available")
    entity = dynamic.entity(name)
    current = dynamic.configs_of(entity)
    effective = {k.name: k.default or "" for k in KAFKA_ONLY_KEYS.values()}
    effective.update(dynamic.configs_of(DEFAULT_ENTITY))  # kafka_only keys: the cluster default
    effective.update({k: s.text or "" for k, s in broker.config.settings.items()})
    changes = apply_ops(current, effective, ops, _broker_is_list)
    await dynamic.replace(entity, merged(current, changes), validate)


def _broker_is_list(name: str) -> bool:
    key = KEYS_BY_NAME.get(name) or KAFKA_ONLY_KEYS.get(name)
    return key is not None and key.type is BrokerConfigType.LIST


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    validate = bool(request.body.get("validate_only"))
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
            if rtype == ResourceType.TOPIC:
                await _alter_topic(ctx.broker, rname, res["configs"], validate)
            elif rtype == ResourceType.BROKER:
                await _alter_broker(ctx.broker, rname, res["configs"], validate)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {rtype}")
        except KafkaError as e:
            out["error_code"], out["error_message"] = int(e.code), e.message or None
        responses.append(out)
    return {"throttle_time_ms": 0, "responses": responses}
