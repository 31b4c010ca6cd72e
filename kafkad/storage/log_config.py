"""Topic-level log settings (Kafka's `LogConfig`): one declared table, one frozen dataclass.

`TOPIC_CONFIGS` lists every topic key once with Kafka's dotted name, the `LogConfig` field it fills,
its type, default, validator and doc. `LogConfig.with_overrides()` parses and validates string values
(what CreateTopics / AlterConfigs / a properties file carry) through that table, and `describe()` turns
a config back into (key, value, is_default) rows for DescribeConfigs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kafkad.protocol.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DAY_MS = 24 * 60 * 60 * 1000


class ConfigType(Enum):
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    BOOLEAN = "boolean"
    LIST = "list"


Validator = Callable[[Any], str | None]  # returns why the value is invalid, or None


def at_least(low: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value >= low else f"value must be at least {low}"

    return check


def between(low: float, high: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if low <= value <= high else f"value must be between {low} and {high}"

    return check


def one_of(*choices: str) -> Validator:
    def check(value: Any) -> str | None:
        items = value if isinstance(value, tuple) else (value,)
        bad = [v for v in items if v not in choices]
        return f"value must be one of {', '.join(choices)}" if bad or not items else None

    return check


@dataclass(frozen=True, slots=True)
class ConfigDef:
    key: str
    field: str
    type: ConfigType
    default: Any
    validator: Validator | None
    doc: str


def _parse(defn: ConfigDef, raw: str) -> Any:
    text = raw.strip()
    t = defn.type
    if t in (ConfigType.INT, ConfigType.LONG):
        value = int(text)
        limit = INT_MAX if t is ConfigType.INT else LONG_MAX
        if not -limit - 1 <= value <= limit:
            raise ValueError(f"{value} does not fit a {t.value}")
        return value
    if t is ConfigType.DOUBLE:
        return float(text)
    if t is ConfigType.BOOLEAN:
        low = text.lower()
        if low not in ("true", "false"):
            raise ValueError("expected true or false")
        return low == "true"
    if t is ConfigType.LIST:
        return tuple(item.strip() for item in text.split(",") if item.strip())
    return text


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


_C = ConfigDef
_I, _L, _D, _S, _B, _LS = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.BOOLEAN,
    ConfigType.LIST,
)

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    d.key: d
    for d in (
        _C("segment.bytes", "segment_bytes", _I, 1 << 30, at_least(14), "Roll a new segment at this size."),
        _C("segment.ms", "segment_ms", _L, 7 * DAY_MS, at_least(1), "Roll a segment older than this."),
        _C("segment.jitter.ms", "segment_jitter_ms", _L, 0, at_least(0), "Max random jitter off segment.ms."),
        _C("segment.index.bytes", "segment_index_bytes", _I, 10 << 20, at_least(4), "Offset index size."),
        _C(
            "index.interval.bytes",
            "index_interval_bytes",
            _I,
            4096,
            at_least(0),
            "Bytes between index entries.",
        ),
        _C(
            "retention.ms", "retention_ms", _L, 7 * DAY_MS, at_least(-1), "Delete segments older (-1: never)."
        ),
        _C(
            "retention.bytes",
            "retention_bytes",
            _L,
            -1,
            None,
            "Max partition size before deletion (-1: none).",
        ),
        _C("flush.messages", "flush_messages", _L, LONG_MAX, at_least(1), "fsync after this many messages."),
        _C("flush.ms", "flush_ms", _L, LONG_MAX, at_least(0), "fsync a log unflushed for this long."),
        _C("max.message.bytes", "max_message_bytes", _I, 1048588, at_least(0), "Largest record batch."),
        _C(
            "message.timestamp.type",
            "message_timestamp_type",
            _S,
            "CreateTime",
            one_of("CreateTime", "LogAppendTime"),
            "Record timestamps: producer's CreateTime or broker's LogAppendTime.",
        ),
        _C(
            "message.timestamp.difference.max.ms",
            "message_timestamp_difference_max_ms",
            _L,
            LONG_MAX,
            at_least(0),
            "Max CreateTime distance from the broker clock.",
        ),
        _C(
            "cleanup.policy",
            "cleanup_policy",
            _LS,
            ("delete",),
            one_of("delete", "compact"),
            "delete and/or compact old segments.",
        ),
        _C("min.insync.replicas", "min_insync_replicas", _I, 1, at_least(1), "Min ISR for acks=all."),
        _C("delete.retention.ms", "delete_retention_ms", _L, DAY_MS, at_least(0), "Tombstone retention."),
        _C("file.delete.delay.ms", "file_delete_delay_ms", _L, 60000, at_least(0), "Delay before unlinking."),
        _C(
            "min.cleanable.dirty.ratio",
            "min_cleanable_dirty_ratio",
            _D,
            0.5,
            between(0, 1),
            "Dirty ratio that makes a log cleanable.",
        ),
        _C(
            "min.compaction.lag.ms", "min_compaction_lag_ms", _L, 0, at_least(0), "Min age before compaction."
        ),
        _C(
            "max.compaction.lag.ms",
            "max_compaction_lag_ms",
            _L,
            LONG_MAX,
            at_least(1),
            "Max compaction delay.",
        ),
        _C(
            "compression.type",
            "compression_type",
            _S,
            "producer",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
            "Final codec of the topic; producer keeps the producer's.",
        ),
        _C(
            "unclean.leader.election.enable",
            "unclean_leader_election_enable",
            _B,
            False,
            None,
            "Allow out-of-sync replicas to become leader.",
        ),
        _C("preallocate", "preallocate", _B, False, None, "Preallocate segment files."),
        _C(
            "message.downconversion.enable",
            "message_downconversion_enable",
            _B,
            True,
            None,
            "Down-convert for old fetchers.",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The settings of one topic's logs. Build variants with `with_overrides`, never by hand-parsing."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 << 20
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = ("delete",)
    min_insync_replicas: int = 1
    delete_retention_ms: int = DAY_MS
    file_delete_delay_ms: int = 60000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    compression_type: str = "producer"
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    message_downconversion_enable: bool = True
    # flush.messages or flush.ms set: appends may have to be fsynced before their answer (log_sync).
    # A field, not a property: the Produce path tests it on every append.
    sync_on_append: bool = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sync_on_append", self.flush_messages < LONG_MAX or self.flush_ms < LONG_MAX)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """A copy with Kafka topic keys applied; KafkaError(INVALID_CONFIG, "<key>: <why>") if one is bad."""
        changes: dict[str, Any] = {}
        for key, raw in overrides.items():
            defn = TOPIC_CONFIGS.get(key)
            if defn is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key}: unknown topic config")
            try:
                value = _parse(defn, str(raw))
            except ValueError as exc:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG, f"{key}: invalid {defn.type.value} {raw!r} ({exc})"
                ) from None
            why = defn.validator(value) if defn.validator else None
            if why is not None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key}: {why} (got {raw!r})")
            changes[defn.field] = value
        return dataclasses.replace(self, **changes)

    def describe(self) -> list[tuple[str, str, bool]]:
        """(key, value, is_default) for every topic key, in table order (DescribeConfigs)."""
        rows = []
        for key, defn in TOPIC_CONFIGS.items():
            value = getattr(self, defn.field)
            rows.append((key, _format(value), value == defn.default))
        return rows
