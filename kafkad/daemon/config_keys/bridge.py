"""Broker keys of the Spark bridge (shipping closed segments to a landing dir); kafkad-only.

Rows of config_table.KEYS, which joins these tuples in README order (`key`: config_keys/declare.py).
"""

from __future__ import annotations

from kafkad.daemon.config_defs import at_least
from kafkad.daemon.config_keys.declare import BOOL, LO, LONG, LST, STR, ConfigKey, M, key

BRIDGE_KEYS: tuple[ConfigKey, ...] = (
    key(
        "bridge.enabled",
        BOOL,
        False,
        "kafkad: ship closed segments of `bridge.topics` to `bridge.landing.dir`.",
        M,
        group="bridge",
    ),
    key(
        "bridge.landing.dir",
        STR,
        None,
        "kafkad: directory segments are shipped to (required when the bridge is on).",
        M,
        group="bridge",
    ),
    key(
        "bridge.site",
        STR,
        None,
        "kafkad: name of this site in the landing area and in every Parquet row (letters, digits, `.`, "
        "`_`, `-`); unset = the cluster id (a standalone broker's is in meta.properties).",
        M,
        group="bridge",
    ),
    key(
        "bridge.topics",
        LST,
        [],
        "kafkad: topics to ship, comma-separated; each entry is a regular expression that must match "
        "the whole topic name (`orders-.*` ships orders-eu and orders-us, `orders` only the topic "
        "orders); empty = every topic not starting with `__`.",
        M,
        group="bridge",
    ),
    key(
        "bridge.rate.limit.bytes.per.sec",
        LONG,
        -1,
        "kafkad: shipping bandwidth cap (-1 = none).",
        LO,
        at_least(-1),
        group="bridge",
    ),
    key(
        "bridge.max.segment.age.ms",
        LONG,
        3600000,
        "kafkad: roll and ship an active segment older than this.",
        LO,
        at_least(1),
        group="bridge",
    ),
)
