"""Field shapes that many of Kafka's message JSON files repeat, as small builders for the apis_* tables.

Each builder returns exactly the `Field`s the JSON spells out (same names, versions, nullability, defaults),
so a table written with them encodes byte for byte as one written field by field; `versions` is always the
Kafka version-range string of the fields built ("0+", "2+", ...).
"""

from __future__ import annotations

from typing import Any

from kafkad.protocol.schema import _UNSET, F, Field


def throttle(versions: str = "0+", **kw: Any) -> Field:
    """ThrottleTimeMs (int32)."""
    return F("throttle_time_ms", "int32", versions, **kw)


def error_code(versions: str = "0+", **kw: Any) -> Field:
    """ErrorCode (int16)."""
    return F("error_code", "int16", versions, **kw)


def error_message(versions: str = "0+", *, default: Any = _UNSET) -> Field:
    """ErrorMessage: a string nullable in every version it exists in."""
    return F("error_message", "string", versions, nullable=versions, default=default)


def error_pair(versions: str = "0+", *, default: Any = _UNSET) -> tuple[Field, Field]:
    """ErrorCode then ErrorMessage."""
    return error_code(versions), error_message(versions, default=default)


def resource(versions: str = "0+") -> tuple[Field, Field]:
    """ResourceType (int8) then ResourceName (string): a config or ACL resource."""
    return F("resource_type", "int8", versions), F("resource_name", "string", versions)


def config_entry(versions: str = "0+") -> tuple[Field, Field]:
    """Name then a nullable Value: one config of CreateTopics / AlterConfigs / DescribeConfigs."""
    return F("name", "string", versions), F("value", "string", versions, nullable=versions)


def topic_partitions(
    array: str,
    versions: str,
    partition_fields: tuple[Field, ...],
    *,
    topic: str = "name",
    partitions: str = "partitions",
    nullable: str | None = None,
    default: Any = _UNSET,
) -> Field:
    """The usual topics -> partitions nesting: an array `array` of (topic string, `partitions` array)."""
    return F(
        array,
        "[]",
        versions,
        nullable=nullable,
        default=default,
        fields=(F(topic, "string", versions), F(partitions, "[]", versions, fields=partition_fields)),
    )


def topic_indexes(
    array: str, versions: str, *, topic: str = "name", indexes: str = "partition_indexes", **kw: Any
) -> Field:
    """An array of (topic string, int32 array of partition indexes)."""
    return F(
        array, "[]", versions, fields=(F(topic, "string", versions), F(indexes, "[]int32", versions)), **kw
    )
