"""Every broker key kafkad understands, declared once (Kafka's `KafkaConfig`/`LogConfig.define`).

The loader validates `server.properties` against this table, `--check-config` and DescribeConfigs read it,
and `config_docs.render_markdown` turns it into the README reference. Defaults are Kafka's unless noted.
The rows live in the config_keys package, one module per subsystem; KEYS joins them in README order.
"""

from __future__ import annotations

from kafkad.config.defs import ConfigKey
from kafkad.config.keys.bridge import BRIDGE_KEYS
from kafkad.config.keys.controller import CONTROLLER_KEYS
from kafkad.config.keys.groups import GROUP_KEYS
from kafkad.config.keys.replication import REPLICATION_KEYS
from kafkad.config.keys.security import SECURITY_KEYS
from kafkad.config.keys.server import METRICS_KEYS, SERVER_KEYS, SOCKET_KEYS
from kafkad.config.keys.storage import LOG_KEYS
from kafkad.config.keys.transactions import TRANSACTION_KEYS
from kafkad.config.keys.zookeeper import ZOOKEEPER_KEYS
from kafkad.config.keys.zookeeper_security import ZOOKEEPER_SECURITY_KEYS

__all__ = ["DERIVED_TOPIC_KEYS", "KEYS", "KEYS_BY_NAME"]

KEYS: tuple[ConfigKey, ...] = (
    *SERVER_KEYS,
    *SOCKET_KEYS,
    *SECURITY_KEYS,
    *LOG_KEYS,
    *ZOOKEEPER_KEYS,
    *ZOOKEEPER_SECURITY_KEYS,
    *REPLICATION_KEYS,
    *CONTROLLER_KEYS,
    *GROUP_KEYS,
    *TRANSACTION_KEYS,
    *METRICS_KEYS,
    *BRIDGE_KEYS,
)

KEYS_BY_NAME: dict[str, ConfigKey] = {k.name: k for k in KEYS}

# Topic keys whose broker default is computed from several broker keys (Kafka's precedence rules).
DERIVED_TOPIC_KEYS = ("retention.ms", "segment.ms")
