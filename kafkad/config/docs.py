"""Views of the config table: DescribeConfigs rows, `--check-config` lines, the README reference."""

from __future__ import annotations

from dataclasses import dataclass

from kafkad.config.broker_config import BrokerConfig, Setting
from kafkad.config.defs import ConfigSource, ConfigType, render_value
from kafkad.config.dynamic import DYNAMIC_KEYS
from kafkad.config.table import KEYS
from kafkad.protocol.config_resources import DescribeConfigSource as DescribeSource

_SOURCES = {
    ConfigSource.DEFAULT: DescribeSource.DEFAULT_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT: DescribeSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.DYNAMIC_BROKER: DescribeSource.DYNAMIC_BROKER_CONFIG,
}


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    source: DescribeSource
    is_sensitive: bool
    doc: str


def describe_source(setting: Setting) -> DescribeSource:
    """DescribeConfigs' source of a broker setting, from where its value came."""
    return _SOURCES.get(setting.origin.source, DescribeSource.STATIC_BROKER_CONFIG)


def describe_broker(config: BrokerConfig) -> list[DescribedConfig]:
    """The broker resource of DescribeConfigs: every key in the table; the dynamic ones are not read-only."""
    rows = []
    for key in KEYS:
        s = config.settings[key.name]
        sensitive = key.type is ConfigType.PASSWORD
        rows.append(
            DescribedConfig(
                name=key.name,
                value=None if sensitive else s.text,
                read_only=key.name not in DYNAMIC_KEYS,
                is_default=s.is_default,
                source=describe_source(s),
                is_sensitive=sensitive,
                doc=key.doc,
            )
        )
    return rows


def check_config_lines(config: BrokerConfig) -> list[str]:
    """`kafkad --check-config`: one `key=value  # source` line per key, in table order."""
    out = []
    for key in KEYS:
        s = config.settings[key.name]
        value = "" if s.value is None else "[hidden]" if key.type is ConfigType.PASSWORD else s.text
        out.append(f"{key.name}={value}  # {s.origin}")
    return out


def _md(text: str) -> str:
    return text.replace("|", "\\|")


# Keys read besides the table's rows, documented after their group's table.
_GROUP_NOTES = {
    "security": (
        "Per-listener keys, as Kafka's `listener.name.<listener>.<key>` (listener name in lower case) win over the"
        " key above for that listener: `listener.name.<listener>.ssl.*` (any `ssl.*` key of this table;"
        " `listener.name.metrics.ssl.*` for `https://` metrics listeners),"
        " `listener.name.<listener>.sasl.enabled.mechanisms` and"
        " `listener.name.<listener>.<mechanism>.sasl.jaas.config` (mechanism `plain`, `scram-sha-256` or"
        " `scram-sha-512`). Any other `listener.name.*`, `ssl.*` or `sasl.*` key stops the start."
    ),
}


def render_markdown() -> str:
    """The README's configuration reference, grouped like the table."""
    titles = {
        "server": "Server",
        "socket": "Network",
        "security": "Security (TLS, SASL, ACLs)",
        "log": "Logs and retention",
        "zookeeper": "ZooKeeper and replication",
        "controller": "Controller and cluster membership",
        "group": "Consumer groups",
        "transactions": "Transactions",
        "metrics": "Metrics",
        "bridge": "Spark bridge",
    }
    lines: list[str] = ["## Configuration reference", ""]
    lines.append(
        "Keys of `server.properties` (Java properties syntax; files in `server.properties.d/*.properties` "
        "and `--override key=value` are applied after it, in that order)."
    )
    for group, title in titles.items():
        keys = [k for k in KEYS if k.group == group]
        if not keys:
            continue
        lines += [
            "",
            f"### {title}",
            "",
            "| key | type | default | importance | description |",
            "|---|---|---|---|---|",
        ]
        for k in keys:
            default = render_value(k.default)
            shown = "(unset)" if default is None else f"`{default}`" if default else '`""`'
            lines.append(
                f"| `{k.name}` | {k.type.value} | {_md(shown)} | {k.importance.value} | {_md(k.doc)} |"
            )
        if group in _GROUP_NOTES:
            lines += ["", _GROUP_NOTES[group]]
    return "\n".join(lines) + "\n"
