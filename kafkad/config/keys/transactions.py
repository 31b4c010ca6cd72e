"""Broker keys of the transaction coordinator and the `__transaction_state` topic (Kafka's
TransactionLogConfigs and TransactionStateManagerConfigs, with Kafka's names and defaults except where noted).

Rows of config_table.KEYS, which joins these tuples in README order (`key`: config_keys/declare.py).
"""

from __future__ import annotations

from kafkad.config.defs import at_least
from kafkad.config.keys.declare import INT, LO, ConfigKey, H, key

TRANSACTION_KEYS: tuple[ConfigKey, ...] = (
    key(
        "transaction.state.log.num.partitions",
        INT,
        50,
        "Partitions of __transaction_state.",
        H,
        at_least(1),
        group="transactions",
    ),
    key(
        "transaction.state.log.replication.factor",
        INT,
        1,
        "Replication factor of __transaction_state (Kafka's default is 3; kafkad's 1 lets a lone broker start).",
        H,
        at_least(1),
        group="transactions",
    ),
    key(
        "transaction.state.log.min.isr",
        INT,
        1,
        "min.insync.replicas of __transaction_state (Kafka's default is 2, for its replication factor 3).",
        H,
        at_least(1),
        group="transactions",
    ),
    key(
        "transaction.state.log.segment.bytes",
        INT,
        104857600,
        "Segment size of __transaction_state.",
        H,
        at_least(1),
        group="transactions",
    ),
    key(
        "transaction.max.timeout.ms",
        INT,
        900000,
        "Largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it).",
        H,
        at_least(1),
        group="transactions",
    ),
    key(
        "transactional.id.expiration.ms",
        INT,
        604800000,
        "How long a transactional id with no transaction in progress is kept after its last update.",
        H,
        at_least(1),
        group="transactions",
    ),
    key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        INT,
        10000,
        "How often transactions older than their timeout are aborted (their producers fenced).",
        LO,
        at_least(1),
        group="transactions",
    ),
    key(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        INT,
        3600000,
        "How often expired transactional ids are removed.",
        LO,
        at_least(1),
        group="transactions",
    ),
)
