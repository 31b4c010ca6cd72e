"""Broker keys of the server itself, its client sockets and its metrics endpoints.

Rows of config_table.KEYS, which joins these tuples in README order (`key`: config_keys/declare.py).
"""

from __future__ import annotations

from kafkad.config.defs import at_least, listeners_valid, one_of
from kafkad.config.keys.declare import BOOL, INT, LO, LONG, LST, STR, ConfigKey, H, M, key

SERVER_KEYS: tuple[ConfigKey, ...] = (
    key(
        "broker.id",
        INT,
        -1,
        "This broker's id; -1 (standalone only) generates one once (1001 and up) and keeps it in meta.properties.",
        H,
        at_least(-1),
    ),
    key("broker.rack", STR, None, "Rack (or site) of this broker, reported in Metadata.", M),
    key(
        "listeners",
        LST,
        ["PLAINTEXT://:9092"],
        "Comma-separated NAME://host:port to listen on; an empty host binds every interface.",
        H,
        listeners_valid,
    ),
    key(
        "advertised.listeners",
        LST,
        None,
        "Listeners published to clients in Metadata; defaults to `listeners`.",
        H,
        listeners_valid,
    ),
    key(
        "auto.create.topics.enable",
        BOOL,
        True,
        "Create a topic on Metadata/Produce for an unknown topic when the client allows it.",
        H,
    ),
    key("delete.topic.enable", BOOL, True, "Allow DeleteTopics.", H),
    key(
        "num.partitions",
        INT,
        1,
        "Partitions of auto-created topics and of CreateTopics with num_partitions=-1.",
        M,
        at_least(1),
    ),
    key("default.replication.factor", INT, 1, "Replication factor of auto-created topics.", M, at_least(1)),
    key(
        "min.insync.replicas",
        INT,
        1,
        "Replicas that must acknowledge an acks=all produce.",
        H,
        at_least(1),
        topic_key="min.insync.replicas",
    ),
    key(
        "message.max.bytes",
        INT,
        1048588,
        "Largest record batch accepted (topic: max.message.bytes).",
        H,
        at_least(0),
        topic_key="max.message.bytes",
    ),
    key(
        "compression.type",
        STR,
        "producer",
        "Final compression of a topic's batches; only `producer` (keep as sent) is supported.",
        H,
        one_of("producer"),
        topic_key="compression.type",
    ),
    key(
        "unclean.leader.election.enable",
        BOOL,
        False,
        "Allow an out-of-sync replica to become leader (data loss).",
        H,
        topic_key="unclean.leader.election.enable",
    ),
    key(
        "producer.id.block.size",
        INT,
        1000,
        "kafkad: producer ids reserved (and persisted) per block, so ids never repeat across restarts.",
        LO,
        at_least(1),
    ),
    key(
        "producer.id.expiration.ms",
        INT,
        86400000,
        "Idle time after which a partition forgets an idempotent producer's state.",
        LO,
        at_least(1),
    ),
    key(
        "shutdown.timeout.ms",
        LONG,
        30000,
        "kafkad: how long a graceful shutdown waits for in-flight requests.",
        LO,
        at_least(0),
    ),
)

SOCKET_KEYS: tuple[ConfigKey, ...] = (
    key(
        "socket.request.max.bytes",
        INT,
        104857600,
        "Largest request frame; a larger (or negative) size closes the connection.",
        H,
        at_least(1),
        group="socket",
    ),
    key(
        "socket.send.buffer.bytes",
        INT,
        102400,
        "SO_SNDBUF of client sockets (-1 = OS default).",
        H,
        at_least(-1),
        group="socket",
    ),
    key(
        "socket.receive.buffer.bytes",
        INT,
        102400,
        "SO_RCVBUF of client sockets (-1 = OS default).",
        H,
        at_least(-1),
        group="socket",
    ),
    key(
        "connections.max.idle.ms",
        LONG,
        600000,
        "Close connections idle this long.",
        M,
        at_least(0),
        group="socket",
    ),
    key(
        "queued.max.requests",
        INT,
        500,
        "Pipelined requests per connection before reading pauses.",
        H,
        at_least(1),
        group="socket",
    ),
)

METRICS_KEYS: tuple[ConfigKey, ...] = (
    key(
        "metrics.listeners",
        LST,
        [],
        "kafkad: http://host:port (or https://, TLS from ssl.* / listener.name.metrics.ssl.*) endpoints serving Prometheus metrics and /healthz (empty = off; bind 127.0.0.1 to keep them local).",
        M,
        group="metrics",
    ),
)
