from __future__ import annotations

import dataclasses

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.log_config import TOPIC_CONFIGS, LogConfig


def test_table_defaults_match_dataclass_defaults() -> None:
    config = LogConfig()
    fields = {f.name for f in dataclasses.fields(LogConfig) if f.init}  # not derived ones (sync_on_append)
    for key, defn in TOPIC_CONFIGS.items():
        assert defn.field in fields, key
        assert getattr(config, defn.field) == defn.default, key
    assert {d.field for d in TOPIC_CONFIGS.values()} == fields


def test_kafka_defaults() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == 604_800_000
    assert c.segment_index_bytes == 10 * 1024 * 1024
    assert c.index_interval_bytes == 4096
    assert c.retention_bytes == -1
    assert c.max_message_bytes == 1048588
    assert c.flush_messages == 2**63 - 1
    assert c.cleanup_policy == ("delete",)


def test_overrides_parse_types() -> None:
    c = LogConfig().with_overrides(
        {
            "retention.ms": "-1",
            "segment.bytes": "1048576",
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.25",
            "unclean.leader.election.enable": "TRUE",
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert c.retention_ms == -1
    assert c.segment_bytes == 1 << 20
    assert c.cleanup_policy == ("compact", "delete")
    assert c.min_cleanable_dirty_ratio == 0.25
    assert c.unclean_leader_election_enable is True
    assert c.log_append_time


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("retention.ms", "abc", "retention.ms: invalid long"),
        ("segment.bytes", "3", "segment.bytes: value must be at least 14"),
        ("segment.bytes", str(2**31), "segment.bytes: invalid int"),
        ("cleanup.policy", "shred", "cleanup.policy: value must be one of"),
        ("message.timestamp.type", "Now", "message.timestamp.type: value must be one of"),
        ("min.cleanable.dirty.ratio", "1.5", "min.cleanable.dirty.ratio: value must be between"),
        ("no.such.key", "1", "no.such.key: unknown topic config"),
        ("preallocate", "yes", "preallocate: invalid boolean"),
    ],
)
def test_invalid_overrides(key: str, value: str, why: str) -> None:
    with pytest.raises(KafkaError) as info:
        LogConfig().with_overrides({key: value})
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert info.value.message.startswith(why)


def test_describe_marks_defaults() -> None:
    rows = {k: (v, d) for k, v, d in LogConfig().with_overrides({"retention.ms": "1000"}).describe()}
    assert rows["retention.ms"] == ("1000", False)
    assert rows["segment.bytes"] == (str(1 << 30), True)
    assert rows["cleanup.policy"] == ("delete", True)
    assert rows["preallocate"] == ("false", True)
    assert set(rows) == set(TOPIC_CONFIGS)
