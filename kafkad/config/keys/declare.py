"""What the config key modules declare rows with: short type and importance names and `key()`."""

from __future__ import annotations

from kafkad.config.defs import ConfigKey, ConfigType, Importance

__all__ = ["BOOL", "DBL", "INT", "LO", "LONG", "LST", "STR", "ConfigKey", "H", "M", "key"]

BOOL, INT, LONG, DBL, STR, LST = (
    ConfigType.BOOLEAN,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.LIST,
)
H, M, LO = Importance.HIGH, Importance.MEDIUM, Importance.LOW


def key(
    name: str,
    type_: ConfigType,
    default: bool | int | float | str | list[str] | None,
    doc: str,
    importance: Importance = M,
    *validators: object,
    group: str = "server",
    topic_key: str | None = None,
) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, importance, tuple(validators), group, topic_key)  # type: ignore[arg-type]
