"""Broker keys of the ZooKeeper connection (cluster mode).

Rows of config_table.KEYS, which joins these tuples in README order (`key`: config_keys/declare.py).
"""

from __future__ import annotations

from kafkad.config.defs import at_least
from kafkad.config.keys.declare import INT, LONG, STR, ConfigKey, H, M, key

ZOOKEEPER_KEYS: tuple[ConfigKey, ...] = (
    key(
        "zookeeper.connect",
        STR,
        None,
        "host:port[,host:port][/chroot] of ZooKeeper; unset = standalone broker.",
        H,
        group="zookeeper",
    ),
    key(
        "zookeeper.session.timeout.ms",
        INT,
        18000,
        "ZooKeeper session timeout.",
        H,
        at_least(1),
        group="zookeeper",
    ),
    key(
        "zookeeper.connection.timeout.ms",
        INT,
        None,
        "How long to wait for a ZooKeeper connection; unset = session timeout.",
        H,
        at_least(1),
        group="zookeeper",
    ),
    key(
        "replica.lag.time.max.ms",
        LONG,
        30000,
        "A follower that has not caught up for this long leaves the ISR.",
        H,
        at_least(1),
        group="zookeeper",
    ),
    key(
        "replica.fetch.max.bytes",
        INT,
        1048576,
        "Bytes per partition a follower fetches.",
        M,
        at_least(0),
        group="zookeeper",
    ),
    key(
        "replica.fetch.wait.max.ms",
        INT,
        500,
        "Follower fetch long-poll time.",
        M,
        at_least(0),
        group="zookeeper",
    ),
)
