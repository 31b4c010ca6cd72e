"""Broker keys of the controller and of cluster membership (cluster mode only).

Rows of config_table.KEYS (`key`: config_keys/declare.py). Defaults are Kafka's.
"""

from __future__ import annotations

from kafkad.config.defs import at_least
from kafkad.config.keys.declare import BOOL, INT, LO, LONG, ConfigKey, H, M, key

CONTROLLER_KEYS: tuple[ConfigKey, ...] = (
    key(
        "broker.id.generation.enable",
        BOOL,
        True,
        "With zookeeper.connect and broker.id=-1, take a new id from /brokers/seqid (above reserved.broker.max.id).",
        M,
        group="controller",
    ),
    key(
        "reserved.broker.max.id",
        INT,
        1000,
        "Generated broker ids start above this.",
        M,
        at_least(0),
        group="controller",
    ),
    key(
        "controlled.shutdown.enable",
        BOOL,
        True,
        "On SIGTERM, ask the controller to move this broker's leaderships away before exiting.",
        H,
        group="controller",
    ),
    key(
        "controlled.shutdown.max.retries",
        INT,
        3,
        "Attempts of a controlled shutdown before exiting anyway.",
        M,
        at_least(1),
        group="controller",
    ),
    key(
        "controlled.shutdown.retry.backoff.ms",
        LONG,
        5000,
        "Wait between controlled shutdown attempts.",
        M,
        at_least(0),
        group="controller",
    ),
    key(
        "auto.leader.rebalance.enable",
        BOOL,
        True,
        "The controller moves leadership back to preferred replicas when a broker's share is off.",
        H,
        group="controller",
    ),
    key(
        "leader.imbalance.check.interval.seconds",
        LONG,
        300,
        "How often the controller checks the leader balance.",
        H,
        at_least(1),
        group="controller",
    ),
    key(
        "leader.imbalance.per.broker.percentage",
        INT,
        10,
        "Allowed share (%) of a broker's preferred partitions led elsewhere before a rebalance.",
        H,
        at_least(0),
        group="controller",
    ),
    key(
        "controller.socket.timeout.ms",
        INT,
        30000,
        "Timeout of the controller's requests to brokers.",
        LO,
        at_least(1),
        group="controller",
    ),
)
