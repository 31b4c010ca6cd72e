"""Broker keys of the group coordinator and the `__consumer_offsets` topic.

Rows of config_table.KEYS, which joins these tuples in README order (`key`: config_keys/declare.py).
"""

from __future__ import annotations

from kafkad.config.defs import at_least
from kafkad.config.keys.declare import INT, LONG, ConfigKey, H, M, key

GROUP_KEYS: tuple[ConfigKey, ...] = (
    key(
        "offsets.topic.num.partitions",
        INT,
        50,
        "Partitions of __consumer_offsets.",
        H,
        at_least(1),
        group="group",
    ),
    key(
        "offsets.topic.replication.factor",
        INT,
        1,
        "Replication factor of __consumer_offsets (Kafka's default is 3; kafkad's 1 lets a lone broker start).",
        H,
        at_least(1),
        group="group",
    ),
    key(
        "offsets.topic.segment.bytes",
        INT,
        104857600,
        "Segment size of __consumer_offsets.",
        H,
        at_least(1),
        group="group",
    ),
    key(
        "offsets.retention.minutes",
        INT,
        10080,
        "How long committed offsets of an empty group are kept.",
        H,
        at_least(1),
        group="group",
    ),
    key(
        "offsets.retention.check.interval.ms",
        LONG,
        600000,
        "How often expired offsets are removed.",
        H,
        at_least(1),
        group="group",
    ),
    key(
        "offset.metadata.max.bytes",
        INT,
        4096,
        "Largest commit metadata string.",
        H,
        at_least(0),
        group="group",
    ),
    key(
        "group.initial.rebalance.delay.ms",
        INT,
        3000,
        "Wait for more members before the first rebalance of a new group.",
        M,
        at_least(0),
        group="group",
    ),
    key(
        "group.min.session.timeout.ms",
        INT,
        6000,
        "Smallest session timeout a member may ask for.",
        M,
        at_least(0),
        group="group",
    ),
    key(
        "group.max.session.timeout.ms",
        INT,
        1800000,
        "Largest session timeout a member may ask for.",
        M,
        at_least(0),
        group="group",
    ),
    key("group.max.size", INT, 2147483647, "Members allowed in one group.", M, at_least(1), group="group"),
)
