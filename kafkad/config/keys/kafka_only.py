"""Kafka 3.9's dynamic broker config names that kafkad has no use for (Kafka's
DynamicBrokerConfig.AllDynamicConfigs minus the keys of config_table.KEYS).

Kafka's AlterConfigs / IncrementalAlterConfigs accept these on a BROKER resource and clients (librdkafka's
and confluent-kafka's admin tests, tooling replaying a Kafka setup) set them; kafkad accepts them the same
way, checks their type as Kafka's validateConfigTypes does, stores them with the other dynamic configs and
describes them (DescribeConfigs: the dynamic value, else Kafka's default), but nothing reads them. They are
not server.properties keys: there the security ones are refused rather than ignored (config/broker_config.py).

PER_BROKER: the names Kafka refuses at the cluster-wide default ("Cannot update these configs at default
cluster level, broker id must be specified": its DynamicListenerConfig keys but the connection limits
and network threads).
"""

from __future__ import annotations

from typing import NamedTuple

from kafkad.config.defs import ConfigType

__all__ = ["KAFKA_ONLY_KEYS", "PER_BROKER", "KafkaOnlyKey", "check_value"]

BOOL, INT, LONG, DBL, STR, LST = (
    ConfigType.BOOLEAN,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.LIST,
)
_LONG_MAX = str(2**63 - 1)
_INT_MAX = str(2**31 - 1)


class KafkaOnlyKey(NamedTuple):
    name: str
    type: ConfigType
    default: str | None  # Kafka's default as DescribeConfigs shows it; None: no value


KAFKA_ONLY_KEYS: dict[str, KafkaOnlyKey] = {
    k.name: k
    for k in (
        # LogCleaner.ReconfigurableConfigs
        KafkaOnlyKey("log.cleaner.threads", INT, "1"),
        KafkaOnlyKey("log.cleaner.dedupe.buffer.size", LONG, "134217728"),
        KafkaOnlyKey("log.cleaner.io.buffer.load.factor", DBL, "0.9"),
        KafkaOnlyKey("log.cleaner.io.buffer.size", INT, "524288"),
        KafkaOnlyKey("log.cleaner.io.max.bytes.per.second", DBL, "1.7976931348623157E308"),
        # DynamicLogConfig: the broker synonyms of topic configs kafkad does not implement
        KafkaOnlyKey("log.roll.jitter.ms", LONG, None),
        KafkaOnlyKey("log.roll.jitter.hours", INT, "0"),
        KafkaOnlyKey("log.cleaner.min.compaction.lag.ms", LONG, "0"),
        KafkaOnlyKey("log.cleaner.max.compaction.lag.ms", LONG, _LONG_MAX),
        KafkaOnlyKey("compression.gzip.level", INT, "-1"),
        KafkaOnlyKey("compression.lz4.level", INT, "9"),
        KafkaOnlyKey("compression.zstd.level", INT, "3"),
        KafkaOnlyKey("log.preallocate", BOOL, "false"),
        KafkaOnlyKey("log.message.format.version", STR, "3.0-IV1"),
        KafkaOnlyKey("log.message.timestamp.difference.max.ms", LONG, _LONG_MAX),
        KafkaOnlyKey("log.message.timestamp.before.max.ms", LONG, _LONG_MAX),
        KafkaOnlyKey("log.message.timestamp.after.max.ms", LONG, _LONG_MAX),
        KafkaOnlyKey("log.message.downconversion.enable", BOOL, "true"),
        KafkaOnlyKey("log.local.retention.ms", LONG, "-2"),
        KafkaOnlyKey("log.local.retention.bytes", LONG, "-2"),
        # DynamicThreadPool, metrics reporters
        KafkaOnlyKey("num.io.threads", INT, "8"),
        KafkaOnlyKey("background.threads", INT, "10"),
        KafkaOnlyKey("metric.reporters", LST, ""),
        # DynamicListenerConfig
        KafkaOnlyKey(
            "principal.builder.class",
            STR,
            "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        ),
        KafkaOnlyKey("ssl.provider", STR, None),
        KafkaOnlyKey("ssl.keymanager.algorithm", STR, "SunX509"),
        KafkaOnlyKey("ssl.trustmanager.algorithm", STR, "PKIX"),
        KafkaOnlyKey("ssl.secure.random.implementation", STR, None),
        KafkaOnlyKey("ssl.engine.factory.class", STR, None),
        KafkaOnlyKey("sasl.kerberos.service.name", STR, None),
        KafkaOnlyKey("sasl.kerberos.kinit.cmd", STR, "/usr/bin/kinit"),
        KafkaOnlyKey("sasl.kerberos.ticket.renew.window.factor", DBL, "0.8"),
        KafkaOnlyKey("sasl.kerberos.ticket.renew.jitter", DBL, "0.05"),
        KafkaOnlyKey("sasl.kerberos.min.time.before.relogin", LONG, "60000"),
        KafkaOnlyKey("sasl.kerberos.principal.to.local.rules", LST, "DEFAULT"),
        KafkaOnlyKey("sasl.login.refresh.window.factor", DBL, "0.8"),
        KafkaOnlyKey("sasl.login.refresh.window.jitter", DBL, "0.05"),
        KafkaOnlyKey("sasl.login.refresh.min.period.seconds", INT, "60"),
        KafkaOnlyKey("sasl.login.refresh.buffer.seconds", INT, "300"),
        KafkaOnlyKey("max.connections", INT, _INT_MAX),
        KafkaOnlyKey("max.connection.creation.rate", INT, _INT_MAX),
        KafkaOnlyKey("num.network.threads", INT, "3"),
        # SocketServer.ReconfigurableConfigs
        KafkaOnlyKey("max.connections.per.ip", INT, _INT_MAX),
        KafkaOnlyKey("max.connections.per.ip.overrides", STR, ""),
        # DynamicProducerStateManagerConfig
        KafkaOnlyKey("transaction.partition.verification.enable", BOOL, "true"),
        # DynamicRemoteLogConfig
        KafkaOnlyKey("remote.log.index.file.cache.total.size.bytes", LONG, "1073741824"),
        KafkaOnlyKey("remote.log.manager.copy.max.bytes.per.second", LONG, _LONG_MAX),
        KafkaOnlyKey("remote.log.manager.fetch.max.bytes.per.second", LONG, _LONG_MAX),
        KafkaOnlyKey("remote.log.manager.thread.pool.size", INT, "10"),
        KafkaOnlyKey("remote.log.manager.copier.thread.pool.size", INT, "10"),
        KafkaOnlyKey("remote.log.manager.expiration.thread.pool.size", INT, "10"),
        KafkaOnlyKey("remote.log.reader.threads", INT, "10"),
    )
}

_CLUSTER_LEVEL = {"max.connections", "max.connection.creation.rate", "num.network.threads"}
_LISTENER = {
    "principal.builder.class",
    "ssl.provider",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "ssl.engine.factory.class",
}
PER_BROKER: frozenset[str] = frozenset(
    n for n in KAFKA_ONLY_KEYS if (n in _LISTENER or n.startswith("sasl.")) and n not in _CLUSTER_LEVEL
)


def check_value(key: KafkaOnlyKey, text: str) -> str | None:
    """Kafka's type check of a dynamic value: an error message, or None when `text` parses."""
    t = text.strip()
    try:
        if key.type in (INT, LONG):
            n = int(t)
            bits = 31 if key.type is INT else 63
            if not -(2**bits) <= n < 2**bits:
                raise ValueError(t)
        elif key.type is DBL:
            float(t)
        elif key.type is BOOL and t.lower() not in ("true", "false"):
            raise ValueError(t)
    except ValueError:
        return f"Invalid value {text} for configuration {key.name}: Not a {key.type.value}"
    return None
