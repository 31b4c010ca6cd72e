"""Broker configuration: load `server.properties`, its drop-in dir and `--override`s against the table.

Order (later wins): the file, then `<file>.d/*.properties` in name order, then `--override key=value`.
Every effective value remembers where it came from (file:line, override, or default) for
`--check-config` and DescribeConfigs. Bad values raise ConfigError naming file, line and key; unknown keys
only warn, with a "did you mean". The result is one frozen BrokerConfig holding a frozen dataclass per
subsystem; storage's LogConfig/LogManagerConfig are built from it on demand.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kafkad.config.defs import (
    ConfigKey,
    ConfigSource,
    ConfigValue,
    ListenerSpec,
    parse_listener,
    parse_value,
    render_value,
)
from kafkad.config.keys.security import SECURITY_PREFIXES
from kafkad.config.properties import PropertiesSyntaxError, parse_properties
from kafkad.config.table import KEYS, KEYS_BY_NAME
from kafkad.security.settings import SecurityConfig, SecurityConfigError, build_security, pattern_key_base
from kafkad.spark_bridge.s3 import S3Options, split_endpoint
from kafkad.zk.security import NO_SECURITY, ZkSecurity, build_zk_security

if TYPE_CHECKING:
    from kafkad.security.settings import TlsSettings
    from kafkad.storage.log_config import LogConfig
    from kafkad.storage.log_manager_config import LogManagerConfig

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """A configuration problem, naming where it is: `file:line: key: message`."""

    def __init__(
        self, message: str, *, file: str | None = None, line: int | None = None, key: str | None = None
    ):
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        if key is not None:
            where += f"{key}: "
        super().__init__(where + message)
        self.file, self.line, self.key, self.message = file, line, key, message


@dataclass(frozen=True, slots=True)
class Origin:
    source: ConfigSource
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        if self.source is ConfigSource.FILE:
            return f"{self.file}:{self.line}"
        return str(self.source.value)


@dataclass(frozen=True, slots=True)
class Setting:
    key: ConfigKey
    value: ConfigValue
    origin: Origin

    @property
    def is_default(self) -> bool:
        return self.origin.source is ConfigSource.DEFAULT

    @property
    def text(self) -> str | None:
        return render_value(self.value)

    @property
    def origin_text(self) -> str:
        return str(self.origin)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    broker_id: int
    rack: str | None
    listeners: tuple[ListenerSpec, ...]
    advertised_listeners: tuple[ListenerSpec, ...]
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    num_partitions: int
    default_replication_factor: int
    min_insync_replicas: int
    message_max_bytes: int
    producer_id_block_size: int
    shutdown_timeout_ms: int


@dataclass(frozen=True, slots=True)
class SocketConfig:
    request_max_bytes: int
    send_buffer_bytes: int
    receive_buffer_bytes: int
    connections_max_idle_ms: int
    queued_max_requests: int


@dataclass(frozen=True, slots=True)
class ZooKeeperConfig:
    connect: str | None  # None = standalone
    session_timeout_ms: int
    connection_timeout_ms: int
    replica_lag_time_max_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_wait_max_ms: int
    security: ZkSecurity = NO_SECURITY  # SASL / TLS to ZooKeeper, zookeeper.set.acl


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_ms: int
    offsets_retention_check_interval_ms: int
    offset_metadata_max_bytes: int
    initial_rebalance_delay_ms: int
    min_session_timeout_ms: int
    max_session_timeout_ms: int
    max_size: int


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """Broker-wide storage keys, handed to storage's LogManagerConfig."""

    log_dirs: tuple[str, ...]
    retention_check_interval_ms: int
    flush_scheduler_interval_ms: int
    flush_offset_checkpoint_interval_ms: int
    recovery_point_flush_ms: int
    max_bytes: int
    min_free_percent: float
    recovery_threads: int
    # Topic-level defaults (Kafka topic key -> string value), precedence rules already applied.
    topic_defaults: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    enabled: bool
    landing_dir: str | None
    site: str | None  # None: the cluster id
    topics: tuple[str, ...]
    rate_limit_bytes_per_sec: int
    max_segment_age_ms: int
    s3: S3Options = field(default_factory=S3Options)  # overrides of the AWS chain for s3://


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    listeners: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    settings: Mapping[str, Setting]
    warnings: tuple[str, ...]
    server: ServerConfig
    socket: SocketConfig
    zookeeper: ZooKeeperConfig
    group: GroupConfig
    storage: StorageSettings
    bridge: BridgeConfig
    metrics: MetricsConfig
    security: SecurityConfig

    @property
    def standalone(self) -> bool:
        return self.zookeeper.connect is None

    def get(self, name: str) -> ConfigValue:
        return self.settings[name].value

    def log_config(self) -> LogConfig:
        """The default topic config (storage's LogConfig) from the broker's log.* keys."""
        from kafkad.storage.log_config import LogConfig

        return LogConfig().with_overrides(dict(self.storage.topic_defaults))

    def log_manager_config(self) -> LogManagerConfig:
        from kafkad.storage.log_manager_config import LogManagerConfig

        st = self.storage
        return LogManagerConfig(
            log_dirs=st.log_dirs,
            log_dirs_max_bytes=st.max_bytes,
            log_dirs_min_free_percent=st.min_free_percent,
            retention_check_interval_ms=st.retention_check_interval_ms,
            flush_scheduler_interval_ms=st.flush_scheduler_interval_ms,
            flush_checkpoint_interval_ms=st.flush_offset_checkpoint_interval_ms,
            recovery_point_flush_ms=st.recovery_point_flush_ms,
            file_delete_delay_ms=int(st.topic_defaults.get("file.delete.delay.ms", "60000")),
            num_recovery_threads=st.recovery_threads,
        )

    def topic_default_origin(self, topic_key: str) -> Setting | None:
        """The broker setting a topic key's default comes from (for DescribeConfigs' source)."""
        for k in _TOPIC_SOURCES.get(topic_key, ()):
            s = self.settings[k]
            if not s.is_default:
                return s
        names = _TOPIC_SOURCES.get(topic_key)
        return self.settings[names[-1]] if names else None


# Topic key -> broker keys it may come from, highest precedence first.
_TOPIC_SOURCES: dict[str, tuple[str, ...]] = {
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    **{k.topic_key: (k.name,) for k in KEYS if k.topic_key},
}


def _suggest(name: str) -> str:
    import difflib  # only for a key kafkad does not know: not on every startup

    close = difflib.get_close_matches(name, KEYS_BY_NAME, n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def _read_file(path: Path) -> list[tuple[str, str, int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror or e}", file=str(path)) from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"not UTF-8: {e}", file=str(path)) from None
    try:
        entries = parse_properties(text)
    except PropertiesSyntaxError as e:
        raise ConfigError(e.message, file=str(path), line=e.line) from None
    return [(e.key, e.value, e.line, str(path)) for e in entries]


def _config_files(path: Path) -> list[Path]:
    files = [path]
    dropin = path.with_name(path.name + ".d")
    if dropin.is_dir():
        files += sorted(p for p in dropin.iterdir() if p.suffix == ".properties" and p.is_file())
    return files


def load_config(path: Path | str | None, overrides: Sequence[str] = ()) -> BrokerConfig:
    """Read, validate and build; raises ConfigError. Unknown keys are logged and kept in `warnings`."""
    raw: list[tuple[str, str, Origin]] = []
    if path is not None:
        for f in _config_files(Path(path)):
            for key, value, line, fname in _read_file(f):
                raw.append((key, value, Origin(ConfigSource.FILE, fname, line)))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r} is not key=value")
        raw.append((key.strip(), value.strip(), Origin(ConfigSource.OVERRIDE)))
    return build_config(raw)


def build_config(raw: Iterable[tuple[str, str, Origin]]) -> BrokerConfig:
    settings: dict[str, Setting] = {k.name: Setting(k, k.default, Origin(ConfigSource.DEFAULT)) for k in KEYS}
    warnings: list[str] = []
    for name, text, origin in raw:
        key = KEYS_BY_NAME.get(name)
        where = f"{origin}: " if origin.source is not ConfigSource.DEFAULT else ""
        if key is None and name.startswith(SECURITY_PREFIXES):
            key = _security_pattern_key(name, origin)
        if key is None:
            msg = f"{where}unknown key {name!r} ignored{_suggest(name)}"
            log.warning("%s", msg)
            warnings.append(msg)
            continue
        try:
            value = parse_value(key.type, text)
        except ValueError as e:
            raise ConfigError(str(e), file=origin.file or "--override", line=origin.line, key=name) from None
        err = key.validate(value)
        if err:
            raise ConfigError(
                f"{err} (got {text!r})", file=origin.file or "--override", line=origin.line, key=name
            )
        settings[name] = Setting(key, value, origin)
    return _assemble(settings, tuple(warnings))


def _security_pattern_key(name: str, origin: Origin) -> ConfigKey:
    """A listener.name.* key stands for its table key; any other unknown ssl.*/sasl.* key is refused."""
    base = pattern_key_base(name)
    known = KEYS_BY_NAME.get(base) if base is not None else None
    if known is None:
        raise ConfigError(
            f"kafkad cannot honour this security key (refused rather than ignored){_suggest(name)}",
            file=origin.file or "--override",
            line=origin.line,
            key=name,
        )
    return ConfigKey(name, known.type, None, known.doc, known.importance, known.validators, "security")


def _build_tls_context(t: TlsSettings) -> object:
    """Checks TLS settings by building their context; a config without TLS never imports the TLS code."""
    from kafkad.security.tls import build_context

    return build_context(t)


def _err(settings: Mapping[str, Setting], key: str, message: str) -> ConfigError:
    o = settings[key].origin
    return ConfigError(
        message,
        file=o.file or (None if o.source is ConfigSource.DEFAULT else "--override"),
        line=o.line,
        key=key,
    )


def _assemble(s: Mapping[str, Setting], warnings: tuple[str, ...]) -> BrokerConfig:
    def v(name: str) -> ConfigValue:
        return s[name].value

    def i(name: str) -> int:
        x = v(name)
        assert isinstance(x, int)
        return x

    def opt_i(name: str) -> int | None:
        x = v(name)
        return x if isinstance(x, int) and not isinstance(x, bool) else None

    def b(name: str) -> bool:
        return bool(v(name))

    def opt_s(name: str) -> str | None:
        x = v(name)
        return x if isinstance(x, str) and x != "" else None

    def lst(name: str) -> tuple[str, ...]:
        x = v(name)
        return tuple(x) if isinstance(x, list) else ()

    zk = opt_s("zookeeper.connect")
    broker_id = i("broker.id")
    # -1 stays -1 here: the log dirs' meta.properties keep an id generated once (cluster mode: from
    # /brokers/seqid, when broker.id.generation.enable).
    if broker_id < 0 and zk is not None and not b("broker.id.generation.enable"):
        raise _err(
            s,
            "broker.id",
            "must be set (>= 0) when zookeeper.connect is set without broker.id.generation.enable",
        )
    listeners = tuple(parse_listener(x) for x in lst("listeners"))
    if not listeners:
        raise _err(s, "listeners", "at least one listener is required")
    advertised = tuple(parse_listener(x) for x in lst("advertised.listeners")) or listeners
    try:
        security = build_security(
            {name: st.value for name, st in s.items()}, tuple(x.name for x in listeners), _build_tls_context
        )
    except SecurityConfigError as e:
        raise _err(s, e.key, e.message) if e.key in s else ConfigError(e.message, key=e.key) from None
    zk_security = NO_SECURITY
    if zk is not None:
        try:
            zk_security = build_zk_security({name: st.value for name, st in s.items()}, os.environ)
        except SecurityConfigError as e:
            raise _err(s, e.key, e.message) if e.key in s else ConfigError(e.message, key=e.key) from None
    if i("group.min.session.timeout.ms") > i("group.max.session.timeout.ms"):
        raise _err(s, "group.min.session.timeout.ms", "must not exceed group.max.session.timeout.ms")
    if b("bridge.enabled") and opt_s("bridge.landing.dir") is None:
        raise _err(s, "bridge.enabled", "bridge.landing.dir must be set when the bridge is enabled")
    site = opt_s("bridge.site")
    if site is not None:
        from kafkad.spark_bridge.manifest import valid_site  # the bridge's code only when it is configured

        if not valid_site(site):
            raise _err(s, "bridge.site", "use letters, digits, '.', '_' and '-' only")
    endpoint = opt_s("bridge.s3.endpoint.url")
    if endpoint is not None:
        try:
            split_endpoint(endpoint)
        except ValueError as e:
            raise _err(s, "bridge.s3.endpoint.url", str(e)) from None
    if (opt_s("bridge.s3.access.key.id") is None) != (opt_s("bridge.s3.secret.access.key") is None):
        raise _err(s, "bridge.s3.access.key.id", "set with bridge.s3.secret.access.key, or neither")
    log_dirs = lst("log.dirs") or (str(v("log.dir")),)

    # Kafka's precedence: log.retention.ms > .minutes > .hours; log.roll.ms > log.roll.hours.
    retention_ms = opt_i("log.retention.ms")
    if retention_ms is None:
        minutes = opt_i("log.retention.minutes")
        retention_ms = minutes * 60_000 if minutes is not None else i("log.retention.hours") * 3_600_000
    if retention_ms < 0:
        retention_ms = -1
    roll_ms = opt_i("log.roll.ms")
    if roll_ms is None:
        roll_ms = i("log.roll.hours") * 3_600_000
    topic_defaults: dict[str, str] = {"retention.ms": str(retention_ms), "segment.ms": str(roll_ms)}
    for key in KEYS:
        if key.topic_key and s[key.name].value is not None:
            text = render_value(s[key.name].value)
            assert text is not None
            topic_defaults[key.topic_key] = text
    if "flush.ms" not in topic_defaults:
        topic_defaults["flush.ms"] = str(i("log.flush.scheduler.interval.ms"))

    return BrokerConfig(
        settings=dict(s),
        warnings=warnings,
        server=ServerConfig(
            broker_id=broker_id,
            rack=opt_s("broker.rack"),
            listeners=listeners,
            advertised_listeners=advertised,
            auto_create_topics_enable=b("auto.create.topics.enable"),
            delete_topic_enable=b("delete.topic.enable"),
            num_partitions=i("num.partitions"),
            default_replication_factor=i("default.replication.factor"),
            min_insync_replicas=i("min.insync.replicas"),
            message_max_bytes=i("message.max.bytes"),
            producer_id_block_size=i("producer.id.block.size"),
            shutdown_timeout_ms=i("shutdown.timeout.ms"),
        ),
        socket=SocketConfig(
            request_max_bytes=i("socket.request.max.bytes"),
            send_buffer_bytes=i("socket.send.buffer.bytes"),
            receive_buffer_bytes=i("socket.receive.buffer.bytes"),
            connections_max_idle_ms=i("connections.max.idle.ms"),
            queued_max_requests=i("queued.max.requests"),
        ),
        zookeeper=ZooKeeperConfig(
            connect=zk,
            session_timeout_ms=i("zookeeper.session.timeout.ms"),
            connection_timeout_ms=opt_i("zookeeper.connection.timeout.ms")
            or i("zookeeper.session.timeout.ms"),
            replica_lag_time_max_ms=i("replica.lag.time.max.ms"),
            replica_fetch_max_bytes=i("replica.fetch.max.bytes"),
            replica_fetch_wait_max_ms=i("replica.fetch.wait.max.ms"),
            security=zk_security,
        ),
        group=GroupConfig(
            offsets_topic_num_partitions=i("offsets.topic.num.partitions"),
            offsets_topic_replication_factor=i("offsets.topic.replication.factor"),
            offsets_topic_segment_bytes=i("offsets.topic.segment.bytes"),
            offsets_retention_ms=i("offsets.retention.minutes") * 60_000,
            offsets_retention_check_interval_ms=i("offsets.retention.check.interval.ms"),
            offset_metadata_max_bytes=i("offset.metadata.max.bytes"),
            initial_rebalance_delay_ms=i("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=i("group.min.session.timeout.ms"),
            max_session_timeout_ms=i("group.max.session.timeout.ms"),
            max_size=i("group.max.size"),
        ),
        storage=StorageSettings(
            log_dirs=log_dirs,
            retention_check_interval_ms=i("log.retention.check.interval.ms"),
            flush_scheduler_interval_ms=i("log.flush.scheduler.interval.ms"),
            flush_offset_checkpoint_interval_ms=i("log.flush.offset.checkpoint.interval.ms"),
            recovery_point_flush_ms=i("log.recovery.point.flush.ms"),
            max_bytes=i("log.dirs.max.bytes"),
            min_free_percent=float(v("log.dirs.min.free.percent")),  # type: ignore[arg-type]
            recovery_threads=i("num.recovery.threads.per.data.dir"),
            topic_defaults=topic_defaults,
        ),
        bridge=BridgeConfig(
            enabled=b("bridge.enabled"),
            landing_dir=opt_s("bridge.landing.dir"),
            site=site,
            topics=lst("bridge.topics"),
            rate_limit_bytes_per_sec=i("bridge.rate.limit.bytes.per.sec"),
            max_segment_age_ms=i("bridge.max.segment.age.ms"),
            s3=S3Options(
                endpoint_url=opt_s("bridge.s3.endpoint.url"),
                region=opt_s("bridge.s3.region"),
                access_key_id=opt_s("bridge.s3.access.key.id"),
                secret_access_key=opt_s("bridge.s3.secret.access.key"),
            ),
        ),
        metrics=MetricsConfig(listeners=lst("metrics.listeners")),
        security=security,
    )
