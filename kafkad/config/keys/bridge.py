"""Broker keys of the Spark bridge (shipping closed segments to a landing dir); kafkad-only.

Rows of config_table.KEYS, which joins these tuples in README order (`key`: config_keys/declare.py).
"""

from __future__ import annotations

from kafkad.config.defs import ConfigType, at_least
from kafkad.config.keys.declare import BOOL, LO, LONG, LST, STR, ConfigKey, M, key

PASSWORD = ConfigType.PASSWORD

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
        "kafkad: where segments are shipped to (required when the bridge is on): a directory (it must "
        "exist: a missing one is an unmounted share, retried), or `s3://bucket/prefix` (the bucket must "
        "exist and be writable; endpoint, region and credentials from the AWS chain or `bridge.s3.*`), "
        "or another pyarrow filesystem URI.",
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
    key(
        "bridge.s3.endpoint.url",
        STR,
        None,
        "kafkad: S3 endpoint of an `s3://` landing (`http://host:port` for a private store); unset = "
        "`AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` from the environment, else AWS.",
        LO,
        group="bridge",
    ),
    key(
        "bridge.s3.region",
        STR,
        None,
        "kafkad: region of an `s3://` landing; unset = `AWS_REGION` / `AWS_DEFAULT_REGION`, else the "
        "shared config file's profile (us-east-1 with a private endpoint).",
        LO,
        group="bridge",
    ),
    key(
        "bridge.s3.access.key.id",
        STR,
        None,
        "kafkad: access key of an `s3://` landing, with `bridge.s3.secret.access.key`; unset = the AWS "
        "chain (`AWS_ACCESS_KEY_ID`, `AWS_PROFILE` in the shared credentials file, instance role).",
        LO,
        group="bridge",
    ),
    key(
        "bridge.s3.secret.access.key",
        PASSWORD,
        None,
        "kafkad: secret key of an `s3://` landing (with `bridge.s3.access.key.id`).",
        LO,
        group="bridge",
    ),
)
