"""Settings of the group coordinator, with Kafka's defaults (keys in config/table.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1

    @classmethod
    def from_values(cls, values: Mapping[str, object]) -> GroupConfig:
        """Build from the broker's typed config values (dotted keys); absent keys keep defaults."""

        def get(key: str, default: int) -> int:
            v = values.get(key)
            return int(v) if isinstance(v, int) else default

        d = cls()
        return cls(
            offsets_topic_num_partitions=get("offsets.topic.num.partitions", d.offsets_topic_num_partitions),
            offsets_topic_segment_bytes=get("offsets.topic.segment.bytes", d.offsets_topic_segment_bytes),
            offsets_retention_ms=get("offsets.retention.minutes", d.offsets_retention_ms // 60_000) * 60_000,
            offsets_retention_check_interval_ms=get(
                "offsets.retention.check.interval.ms", d.offsets_retention_check_interval_ms
            ),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
            group_initial_rebalance_delay_ms=get(
                "group.initial.rebalance.delay.ms", d.group_initial_rebalance_delay_ms
            ),
            group_min_session_timeout_ms=get("group.min.session.timeout.ms", d.group_min_session_timeout_ms),
            group_max_session_timeout_ms=get("group.max.session.timeout.ms", d.group_max_session_timeout_ms),
            group_max_size=get("group.max.size", d.group_max_size),
        )
