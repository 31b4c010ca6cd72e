"""Broker keys of the ZooKeeper client's security: SASL (JAAS `Client` section), mutual TLS and znode ACLs.

Kafka's names (KafkaConfig's `zookeeper.ssl.*`, `zookeeper.set.acl`, `zookeeper.clientCnxnSocket`) plus the
three JVM system properties a Kafka unit passes in KAFKA_OPTS (`java.security.auth.login.config`,
`zookeeper.sasl.client`, `zookeeper.sasl.clientconfig`), which kafkad also takes from server.properties.
kafkad.zk.security turns them into one ZkSecurity and checks them (rows of config_table.KEYS).
"""

from __future__ import annotations

from kafkad.config.defs import ConfigType, one_of
from kafkad.config.keys.declare import BOOL, LO, LST, STR, ConfigKey, H, M, key

PASSWORD = ConfigType.PASSWORD
_G = "zookeeper"

ZOOKEEPER_SECURITY_KEYS: tuple[ConfigKey, ...] = (
    key(
        "zookeeper.set.acl",
        BOOL,
        False,
        "Create znodes with ACLs for the brokers' ZooKeeper identity (SASL user or TLS certificate subject): "
        "world-readable except /config/users, /config/brokers and /delegation_token/tokens. Needs SASL or "
        "TLS to ZooKeeper. Existing znodes: kafkad-zookeeper-security-migration.",
        H,
        group=_G,
    ),
    key(
        "java.security.auth.login.config",
        STR,
        None,
        "JAAS file whose Client section (DigestLoginModule username/password) logs in to ZooKeeper with "
        "DIGEST-MD5; unset = -Djava.security.auth.login.config=FILE in KAFKA_OPTS, as Kafka's units set it.",
        H,
        group=_G,
    ),
    key(
        "zookeeper.sasl.client",
        BOOL,
        True,
        "false: no SASL to ZooKeeper even with a JAAS Client section (as the JVM property; -D in KAFKA_OPTS "
        "works too).",
        M,
        group=_G,
    ),
    key(
        "zookeeper.sasl.clientconfig",
        STR,
        "Client",
        "Name of the JAAS section used to log in to ZooKeeper.",
        LO,
        group=_G,
    ),
    key(
        "zookeeper.clientCnxnSocket",
        STR,
        None,
        "Java class of the ZooKeeper client socket (org.apache.zookeeper.ClientCnxnSocketNetty for TLS): "
        "accepted and ignored, kafkad's client speaks TLS itself.",
        LO,
        group=_G,
    ),
    key(
        "zookeeper.ssl.client.enable",
        BOOL,
        False,
        "Connect to ZooKeeper's secure port with TLS (client certificate from zookeeper.ssl.keystore.*).",
        H,
        group=_G,
    ),
    key(
        "zookeeper.ssl.keystore.location",
        STR,
        None,
        "PEM file with this broker's private key and certificate chain for ZooKeeper's mutual TLS.",
        H,
        group=_G,
    ),
    key(
        "zookeeper.ssl.keystore.password",
        PASSWORD,
        None,
        "Password of the key in zookeeper.ssl.keystore.location when it is encrypted.",
        H,
        group=_G,
    ),
    key(
        "zookeeper.ssl.keystore.type",
        STR,
        None,
        "Key store format; kafkad reads PEM only (unset = PEM; JKS and PKCS12 are refused).",
        M,
        one_of("PEM"),
        group=_G,
    ),
    key(
        "zookeeper.ssl.truststore.location",
        STR,
        None,
        "PEM file of the CA certificates that sign ZooKeeper's certificate; unset = the system's CAs.",
        H,
        group=_G,
    ),
    key(
        "zookeeper.ssl.truststore.password",
        PASSWORD,
        None,
        "Unused with PEM trust stores (accepted).",
        LO,
        group=_G,
    ),
    key(
        "zookeeper.ssl.truststore.type",
        STR,
        None,
        "Trust store format; PEM only (unset = PEM).",
        M,
        one_of("PEM"),
        group=_G,
    ),
    key(
        "zookeeper.ssl.protocol",
        STR,
        "TLSv1.2",
        "Lowest TLS version to ZooKeeper unless zookeeper.ssl.enabled.protocols lists them.",
        LO,
        one_of("TLSv1.2", "TLSv1.3", "TLS"),
        group=_G,
    ),
    key(
        "zookeeper.ssl.enabled.protocols",
        LST,
        None,
        "TLS versions to ZooKeeper (TLSv1.2, TLSv1.3).",
        LO,
        one_of("TLSv1.2", "TLSv1.3"),
        group=_G,
    ),
    key(
        "zookeeper.ssl.cipher.suites",
        LST,
        None,
        "TLS 1.2 cipher suites to ZooKeeper, IANA names as Kafka takes them; unset = OpenSSL's defaults.",
        LO,
        group=_G,
    ),
    key(
        "zookeeper.ssl.endpoint.identification.algorithm",
        STR,
        "HTTPS",
        "HTTPS: ZooKeeper's certificate must name the host in zookeeper.connect; empty: not checked.",
        LO,
        group=_G,
    ),
    key(
        "zookeeper.ssl.crl.enable",
        BOOL,
        False,
        "Certificate revocation lists: not supported (true is refused).",
        LO,
        group=_G,
    ),
    key(
        "zookeeper.ssl.ocsp.enable",
        BOOL,
        False,
        "OCSP: not supported (true is refused).",
        LO,
        group=_G,
    ),
)
