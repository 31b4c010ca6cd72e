"""Broker-level dynamic configs, as Kafka has them (`kafkad-configs --entity-type brokers [--entity-default]
--alter`, IncrementalAlterConfigs / AlterConfigs on a BROKER resource).

The keys Kafka changes without a restart (DYNAMIC_KEYS: the topic-default `log.*` keys and their
synonyms, the cleaner's backoff, plus kafkad's disk budget and bridge rate limit) are applied live and win
over server.properties, in Kafka's order: this broker's dynamic value > the cluster-wide dynamic default >
server.properties (and --override) > the built-in default. Any other key is refused with Kafka's
"Cannot update these configs dynamically" (INVALID_REQUEST), except Kafka's own dynamic names kafkad has
no use for (config_keys/kafka_only.py): those are type-checked, stored and described, never applied.

Values are kept by a DynamicConfigStore (entity -> key -> value; the entity is DEFAULT_ENTITY or a broker
id, as ZooKeeper's /config/brokers/<default> and /config/brokers/<id>). Standalone uses
LocalDynamicConfigStore, a JSON file in the first log dir written atomically; cluster mode uses
zk/config_store.py (ZooKeeper, with a /config/changes notification every broker applies
through `reload`).

Applying rebuilds the whole BrokerConfig from the static settings plus the dynamic layers (so every
reader of `broker.config` sees one consistent config), then pushes the live parts into the components
that hold copies: the log manager's default topic config (every log without a topic override follows),
its disk budget, the cleaner's backoff and the bridge's rate limit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kafkad.config.broker_config import BrokerConfig, ConfigError, Origin, build_config
from kafkad.config.defs import ConfigSource
from kafkad.config.keys.kafka_only import KAFKA_ONLY_KEYS, PER_BROKER, check_value
from kafkad.config.table import KEYS, KEYS_BY_NAME
from kafkad.protocol import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkad.api.broker import Broker

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"
STORE_FILE = "dynamic-broker-configs.json"

_DYNAMIC_EXTRA = (
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.roll.ms",
    "log.roll.hours",
    "log.cleaner.backoff.ms",
    "log.dirs.max.bytes",
    "log.dirs.min.free.percent",
    "bridge.rate.limit.bytes.per.sec",
)
DYNAMIC_KEYS: frozenset[str] = frozenset(
    [k.name for k in KEYS if k.topic_key] + [k for k in _DYNAMIC_EXTRA if k in KEYS_BY_NAME]
)
_DYNAMIC_SOURCES = (ConfigSource.DYNAMIC_DEFAULT, ConfigSource.DYNAMIC_BROKER)

Entities = dict[str, dict[str, str]]


class DynamicConfigStore(Protocol):
    def load(self) -> Entities:
        """Every entity's dynamic configs (blocking)."""
        ...

    def save(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace one entity's dynamic configs (blocking; durable when it returns)."""
        ...


class LocalDynamicConfigStore:
    """A JSON file: {"version": 1, "entities": {"<default>": {...}, "0": {...}}}, replaced atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def in_dir(cls, log_dir: str) -> LocalDynamicConfigStore:
        return cls(Path(log_dir) / STORE_FILE)

    def load(self) -> Entities:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        entities = data.get("entities") if isinstance(data, dict) else None
        if not isinstance(entities, dict):
            raise ValueError(f"{self.path}: not a dynamic config file")
        return {str(e): {str(k): str(v) for k, v in c.items()} for e, c in entities.items()}

    def save(self, entity: str, configs: Mapping[str, str]) -> None:
        entities = self.load()
        if configs:
            entities[entity] = dict(configs)
        else:
            entities.pop(entity, None)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "entities": entities}, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def layered(static: BrokerConfig, entities: Mapping[str, Mapping[str, str]], broker_id: int) -> BrokerConfig:
    """`static` with the dynamic default, then this broker's dynamic configs on top; raises ConfigError."""
    raw: list[tuple[str, str, Origin]] = []
    for name, s in static.settings.items():
        if s.is_default or s.origin.source in _DYNAMIC_SOURCES:
            continue
        text = s.text
        if text is not None:
            raw.append((name, text, s.origin))
    for entity, source in (
        (DEFAULT_ENTITY, ConfigSource.DYNAMIC_DEFAULT),
        (str(broker_id), ConfigSource.DYNAMIC_BROKER),
    ):
        raw += [(k, v, Origin(source)) for k, v in entities.get(entity, {}).items() if k in KEYS_BY_NAME]
    return build_config(raw)


def check_keys(configs: Mapping[str, str], cluster_default: bool = False) -> None:
    """Kafka's refusal of keys that need a restart (INVALID_REQUEST) or that do not exist (INVALID_CONFIG);
    Kafka's own dynamic names (kafka_only) pass when their value has the right type."""
    unknown = sorted(k for k in configs if k not in KEYS_BY_NAME and k not in KAFKA_ONLY_KEYS)
    if unknown:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown broker configs: {', '.join(unknown)}")
    static = sorted(k for k in configs if k not in DYNAMIC_KEYS and k not in KAFKA_ONLY_KEYS)
    if static:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Cannot update these configs dynamically: Set({', '.join(static)}): "
            "they need a restart (edit server.properties)",
        )
    if cluster_default:
        per_broker = sorted(k for k in configs if k in PER_BROKER)
        if per_broker:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Cannot update these configs at default cluster level, broker id must be specified: "
                f"Set({', '.join(per_broker)})",
            )
    for k, v in configs.items():
        key = KAFKA_ONLY_KEYS.get(k)
        err = check_value(key, v) if key is not None else None
        if err:
            raise KafkaError(ErrorCode.INVALID_CONFIG, err)


class DynamicBrokerConfig:
    """broker.dynamic_config: the dynamic layers of one broker and their live application."""

    def __init__(self, broker: Broker, static: BrokerConfig, store: DynamicConfigStore, entities: Entities):
        self.broker = broker
        self.static = static
        self.store = store
        self.entities = entities
        self._lock = asyncio.Lock()

    def entity(self, resource_name: str) -> str:
        """The store entity a BROKER resource names: "" is the cluster-wide default, else this broker."""
        if resource_name == "":
            return DEFAULT_ENTITY
        if resource_name != str(self.broker.broker_id):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {self.broker.broker_id} but received {resource_name}",
            )
        return resource_name

    def configs_of(self, entity: str) -> dict[str, str]:
        return dict(self.entities.get(entity, {}))

    async def replace(self, entity: str, configs: Mapping[str, str], validate_only: bool) -> None:
        """Make `configs` the entity's whole dynamic set: validate, store, apply."""
        check_keys(configs, cluster_default=entity == DEFAULT_ENTITY)
        async with self._lock:
            entities = {**self.entities, entity: dict(configs)}
            try:
                new = layered(self.static, entities, self.broker.broker_id)
            except ConfigError as e:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG, f"{e.key}: {e.message}" if e.key else e.message
                ) from None
            if validate_only:
                return
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self.store.save, entity, dict(configs))
            self.entities = entities if configs else {e: c for e, c in entities.items() if e != entity}
            apply(self.broker, new)
            log.info("dynamic broker config %s: %s", entity, dict(configs) or "(none)")

    async def reload(self) -> None:
        """Another broker changed a dynamic config (cluster mode: a /config/changes notification)."""
        async with self._lock:
            loop = asyncio.get_running_loop()
            entities = _dynamic_only(await loop.run_in_executor(None, self.store.load))
            try:
                new = layered(self.static, entities, self.broker.broker_id)
            except ConfigError as e:
                log.error("dynamic broker configs from the store not applied: %s", e)
                return
            self.entities = entities
            apply(self.broker, new)
            log.info("dynamic broker configs reloaded: %s", entities or "(none)")


def _dynamic_only(entities: Entities) -> Entities:
    """Stored keys that are not dynamic (an older or newer version wrote them) are logged and skipped."""
    out: Entities = {}
    for entity, configs in entities.items():
        out[entity] = {k: v for k, v in configs.items() if k in DYNAMIC_KEYS or k in KAFKA_ONLY_KEYS}
        for k in sorted(set(configs) - set(out[entity])):
            log.warning("dynamic broker config %s: %s is not dynamic, ignored", entity, k)
    return out


def apply(broker: Broker, new: BrokerConfig) -> None:
    """Switch the broker to `new` and push the live keys into the components holding copies."""
    old, broker.config = broker.config, new
    lm = broker.log_manager
    if new.storage.topic_defaults != old.storage.topic_defaults:
        lm.set_default_log_config(new.log_config())
    st = new.storage
    lm.config = dataclasses.replace(
        lm.config, log_dirs_max_bytes=st.max_bytes, log_dirs_min_free_percent=st.min_free_percent
    )
    cleaner = broker.cleaner
    if cleaner is not None:
        cleaner.backoff_s = max(int(new.get("log.cleaner.backoff.ms")), 1) / 1000  # type: ignore[arg-type]
    bridge = broker.bridge
    if bridge is not None and new.bridge.rate_limit_bytes_per_sec != old.bridge.rate_limit_bytes_per_sec:
        bridge.shipper.set_rate_limit(new.bridge.rate_limit_bytes_per_sec)


def load_layered(
    static: BrokerConfig, broker_id: int, store: DynamicConfigStore | None = None
) -> tuple[BrokerConfig, DynamicConfigStore, Entities]:
    """At start (blocking): the stored dynamic configs over `static` (the local file unless a store is
    given, e.g. ZooKeeper's in cluster mode). A stored value this version refuses is logged and skipped
    rather than stopping the broker."""
    if store is None:
        store = LocalDynamicConfigStore.in_dir(static.storage.log_dirs[0])
    entities = _dynamic_only(store.load())
    try:
        config = layered(static, entities, broker_id)
    except ConfigError as e:
        log.error("stored dynamic broker configs ignored: %s", e)
        return static, store, {}
    return config, store, entities
