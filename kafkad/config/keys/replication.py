"""Broker keys of replication (cluster mode): follower fetchers, HW checkpoints, rack-aware reads.

Rows of config_table.KEYS (`key`: config_keys/declare.py). replica.lag.time.max.ms, replica.fetch.max.bytes
and replica.fetch.wait.max.ms are declared with the ZooKeeper keys (config_keys/zookeeper.py).
"""

from __future__ import annotations

from kafkad.config.defs import at_least
from kafkad.config.keys.declare import INT, LO, LONG, STR, ConfigKey, M, key

REPLICATION_KEYS: tuple[ConfigKey, ...] = (
    key(
        "max.incremental.fetch.session.cache.slots",
        INT,
        1000,
        "Incremental fetch sessions (KIP-227) this broker keeps for followers and consumers; 0 serves every "
        "Fetch sessionless.",
        M,
        at_least(0),
    ),
    key(
        "num.replica.fetchers",
        INT,
        1,
        "Fetchers per source broker: a follower's partitions led by one broker are spread over this many "
        "fetch loops (each with its own connection).",
        M,
        at_least(1),
        group="zookeeper",
    ),
    key(
        "replica.fetch.min.bytes",
        INT,
        1,
        "Bytes a follower fetch waits for (up to replica.fetch.wait.max.ms).",
        M,
        at_least(1),
        group="zookeeper",
    ),
    key(
        "replica.fetch.response.max.bytes",
        INT,
        10485760,
        "Bytes one follower fetch response may hold over all its partitions.",
        M,
        at_least(0),
        group="zookeeper",
    ),
    key(
        "replica.fetch.backoff.ms",
        INT,
        1000,
        "How long a follower waits before fetching a partition again after an error.",
        M,
        at_least(0),
        group="zookeeper",
    ),
    key(
        "replica.socket.timeout.ms",
        INT,
        30000,
        "Timeout of a follower's requests to its leader (added to replica.fetch.wait.max.ms for fetches).",
        M,
        at_least(1),
        group="zookeeper",
    ),
    key(
        "replica.high.watermark.checkpoint.interval.ms",
        LONG,
        5000,
        "How often the high watermarks are written to replication-offset-checkpoint.",
        M,
        at_least(1),
        group="zookeeper",
    ),
    key(
        "replica.selector.class",
        STR,
        None,
        "KIP-392: org.apache.kafka.common.replica.RackAwareReplicaSelector lets a consumer that sends its "
        "client.rack read from an in-sync replica in its rack; unset = always the leader.",
        LO,
        group="zookeeper",
    ),
)
