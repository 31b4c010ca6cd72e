"""The vocabulary of the broker config table: key types, validators, importance (Kafka's ConfigDef)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

ConfigValue = bool | int | float | str | list[str] | None


class ConfigType(Enum):
    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"
    PASSWORD = "password"


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class ConfigSource(Enum):
    DEFAULT = "default"
    FILE = "file"
    OVERRIDE = "override"
    DYNAMIC_DEFAULT = "dynamic default broker config"  # kafkad-configs --entity-default --alter
    DYNAMIC_BROKER = "dynamic broker config"  # kafkad-configs --entity-name <id> --alter


_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

Validator = Callable[[ConfigValue], str | None]  # returns an error message, or None when valid


def parse_value(kind: ConfigType, text: str) -> ConfigValue:
    """Text from a properties file -> typed value; ValueError with a readable message on failure."""
    s = text.strip()
    if kind is ConfigType.BOOLEAN:
        if s.lower() in ("true", "false"):
            return s.lower() == "true"
        raise ValueError(f"expected true or false, got {s!r}")
    if kind in (ConfigType.INT, ConfigType.LONG):
        try:
            v = int(s)
        except ValueError:
            raise ValueError(f"expected an integer, got {s!r}") from None
        lo, hi = _INT32 if kind is ConfigType.INT else _INT64
        if not lo <= v <= hi:
            raise ValueError(f"{v} does not fit a {kind.value}")
        return v
    if kind is ConfigType.DOUBLE:
        try:
            return float(s)
        except ValueError:
            raise ValueError(f"expected a number, got {s!r}") from None
    if kind is ConfigType.LIST:
        return [item.strip() for item in s.split(",") if item.strip()]
    return s


def render_value(value: ConfigValue) -> str | None:
    """Typed value -> the string Kafka shows (DescribeConfigs, --check-config)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def at_least(minimum: float) -> Validator:
    def check(v: ConfigValue) -> str | None:
        if v is None or isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return None if v >= minimum else f"value must be at least {minimum}"

    return check


def between(lo: float, hi: float) -> Validator:
    def check(v: ConfigValue) -> str | None:
        if v is None or isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return None if lo <= v <= hi else f"value must be in [{lo}, {hi}]"

    return check


def one_of(*choices: str) -> Validator:
    def check(v: ConfigValue) -> str | None:
        values = v if isinstance(v, list) else [v]
        bad = [x for x in values if x is not None and x not in choices]
        return f"must be one of {', '.join(choices)}" if bad else None

    return check


_LISTENER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[0-9a-fA-F:.]+\]|[^:/\[\]]*):(\d{1,5})$")


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    name: str  # the security protocol / listener name, e.g. PLAINTEXT
    host: str  # "" = every interface
    port: int


def parse_listener(text: str) -> ListenerSpec:
    m = _LISTENER.match(text.strip())
    if not m:
        raise ValueError(f"listener {text!r} is not NAME://host:port")
    host = m.group(2)
    if host.startswith("["):
        host = host[1:-1]
    port = int(m.group(3))
    if port > 65535:
        raise ValueError(f"listener {text!r}: port out of range")
    return ListenerSpec(m.group(1).upper(), host, port)


def listeners_valid(v: ConfigValue) -> str | None:
    if not isinstance(v, list):
        return None
    try:
        specs = [parse_listener(x) for x in v]
    except ValueError as e:
        return str(e)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        return "each listener name may appear only once"
    return None  # each name's security protocol is checked against listener.security.protocol.map


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: ConfigValue
    doc: str
    importance: Importance = Importance.MEDIUM
    validators: Sequence[Validator] = ()
    group: str = "server"
    # Kafka's topic-level key this broker key sets the default of (log.retention.ms -> retention.ms).
    topic_key: str | None = None

    def validate(self, value: ConfigValue) -> str | None:
        for check in self.validators:
            err = check(value)
            if err:
                return err
        return None
