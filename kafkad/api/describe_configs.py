"""DescribeConfigs (32) v0-4 (v0: is_default instead of the source; v3+ documentation stays null):
topic (overrides + broker defaults, with their source; in cluster mode the
overrides come from ZooKeeper, so every broker answers alike), broker (the table, dynamic values with their
dynamic source, then Kafka's dynamic names kafkad only stores: config_keys/kafka_only.py) and the broker
default entity (its dynamic keys only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.api.broker import Broker
from kafkad.config.docs import describe_broker, describe_source
from kafkad.config.dynamic import DEFAULT_ENTITY
from kafkad.config.keys.kafka_only import KAFKA_ONLY_KEYS
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.protocol.config_resources import DescribeConfigSource as DescribeSource
from kafkad.protocol.config_resources import ResourceType

TOPIC = ResourceType.TOPIC
BROKER = ResourceType.BROKER


def _entry(
    name: str, value: str | None, read_only: bool, source: DescribeSource, synonyms: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": int(source),
        "is_default": source is DescribeSource.DEFAULT_CONFIG,
        "is_sensitive": False,
        "synonyms": synonyms,
        "documentation": None,  # v3+: null unless include_documentation (not served)
    }


def _topic_configs(broker: Broker, overrides: dict[str, str], synonyms: bool) -> list[dict[str, Any]]:
    lm = broker.log_manager
    config = lm.default_log_config.with_overrides(overrides) if overrides else lm.default_log_config
    rows = []
    for key, value, _ in config.describe():
        syn: list[dict[str, Any]] = []
        setting = broker.config.topic_default_origin(key)
        if key in overrides:
            source = DescribeSource.DYNAMIC_TOPIC_CONFIG
            syn.append({"name": key, "value": overrides[key], "source": int(source)})
        elif setting is not None and not setting.is_default:
            source = describe_source(setting)
        else:
            source = DescribeSource.DEFAULT_CONFIG
        if setting is not None and not setting.is_default:
            syn.append(
                {
                    "name": setting.key.name,
                    "value": setting.text,
                    "source": int(describe_source(setting)),
                }
            )
        rows.append(_entry(key, value, False, source, syn if synonyms else []))
    return rows


def _broker_configs(broker: Broker) -> list[dict[str, Any]]:
    rows = [_entry(r.name, r.value, r.read_only, r.source, []) for r in describe_broker(broker.config)]
    dynamic = broker.dynamic_config
    own = dynamic.configs_of(str(broker.broker_id)) if dynamic is not None else {}
    default = dynamic.configs_of(DEFAULT_ENTITY) if dynamic is not None else {}
    for key in KAFKA_ONLY_KEYS.values():
        value: str | None
        if key.name in own:
            value, source = own[key.name], DescribeSource.DYNAMIC_BROKER_CONFIG
        elif key.name in default:
            value, source = default[key.name], DescribeSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        else:
            value, source = key.default, DescribeSource.DEFAULT_CONFIG
        rows.append(_entry(key.name, value, False, source, []))
    return rows


def _default_entity_configs(broker: Broker) -> list[dict[str, Any]]:
    """The cluster-wide dynamic default (resource name ""): only its own keys, as Kafka describes it."""
    dynamic = broker.dynamic_config
    configs = dynamic.configs_of(DEFAULT_ENTITY) if dynamic is not None else {}
    return [
        _entry(k, v, False, DescribeSource.DYNAMIC_DEFAULT_BROKER_CONFIG, [])
        for k, v in sorted(configs.items())
    ]


@handler(ApiKey.DESCRIBE_CONFIGS, 0, 4)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    synonyms = bool(request.body.get("include_synonyms"))
    results = []
    for res in request.body["resources"]:
        rtype, rname = res["resource_type"], res["resource_name"]
        out: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": rtype,
            "resource_name": rname,
            "configs": [],
        }
        try:
            if rtype == TOPIC:
                overrides = await broker.control_plane.topic_configs(broker, rname)
                rows = _topic_configs(broker, overrides, synonyms)
            elif rtype == BROKER:
                if rname not in ("", str(broker.broker_id)):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"broker {rname} is not this broker")
                rows = _default_entity_configs(broker) if rname == "" else _broker_configs(broker)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {rtype}")
            keys = res.get("configuration_keys")
            if keys is not None:
                wanted = set(keys)
                rows = [r for r in rows if r["name"] in wanted]
            out["configs"] = rows
        except KafkaError as e:
            out["error_code"], out["error_message"] = int(e.code), e.message or None
        results.append(out)
    return {"throttle_time_ms": 0, "results": results}
