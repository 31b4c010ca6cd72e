"""Views of the config table: DescribeConfigs rows, `--check-config` lines, the README reference."""

from __future__ import annotations

from dataclasses import dataclass

from kafkad.daemon.config import BrokerConfig
from kafkad.daemon.config_defs import ConfigType, render_value
from kafkad.daemon.config_table import KEYS
from kafkad.protocol.config_resources import DescribeConfigSource as DescribeSource


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    source: DescribeSource
    is_sensitive: bool
    doc: str


def describe_broker(config: BrokerConfig) -> list[DescribedConfig]:
    """The broker resource of DescribeConfigs: every key in the table (all read-only: no dynamic config)."""
    rows = []
    for key in KEYS:
        s = config.settings[key.name]
        sensitive = key.type is ConfigType.PASSWORD
        rows.append(
            DescribedConfig(
                name=key.name,
                value=None if sensitive else s.text,
                read_only=True,
                is_default=s.is_default,
                source=DescribeSource.DEFAULT_CONFIG if s.is_default else DescribeSource.STATIC_BROKER_CONFIG,
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
    return "\n".join(lines) + "\n"
