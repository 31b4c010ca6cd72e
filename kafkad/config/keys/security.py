"""Broker keys of TLS, SASL and the authorizer, as Kafka names them (rows of config_table.KEYS).

Per-listener forms (`listener.name.<listener>.ssl.*`, `listener.name.<listener>.<mechanism>.sasl.jaas.config`)
are pattern keys: config.build_config hands them to kafkad.security.settings, which checks them. Every
other `ssl.*` / `sasl.*` key missing from this table is refused at start (SECURITY_PREFIXES).
"""

from __future__ import annotations

from kafkad.config.defs import ConfigType, at_least, one_of
from kafkad.config.keys.declare import BOOL, LO, LONG, LST, STR, ConfigKey, H, M, key

PASSWORD = ConfigType.PASSWORD

# Unknown keys with these prefixes are errors, not warnings: a broker must not come up less secure
# than its file asks.
SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.", "zookeeper.ssl.")

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ACL_AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")


def _mechanisms(v: object) -> str | None:
    if not isinstance(v, list):
        return None
    bad = [m for m in v if m not in SASL_MECHANISMS]
    if bad:
        return f"unsupported SASL mechanism {', '.join(bad)} (kafkad supports {', '.join(SASL_MECHANISMS)})"
    return None


SECURITY_KEYS: tuple[ConfigKey, ...] = (
    key(
        "listener.security.protocol.map",
        LST,
        ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
        "Listener name -> security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), as LISTENER:PROTOCOL.",
        M,
        group="security",
    ),
    key(
        "ssl.keystore.type",
        STR,
        "PEM",
        "Format of the key store; kafkad reads PEM only (Kafka's default JKS is refused).",
        M,
        one_of("PEM"),
        group="security",
    ),
    key(
        "ssl.keystore.location",
        STR,
        None,
        "PEM file with the private key and the certificate chain (re-read on SIGHUP or change).",
        H,
        group="security",
    ),
    key(
        "ssl.keystore.key",
        PASSWORD,
        None,
        "The private key inline, PEM (instead of ssl.keystore.location).",
        H,
        group="security",
    ),
    key(
        "ssl.keystore.certificate.chain",
        STR,
        None,
        "The certificate chain inline, PEM (with ssl.keystore.key).",
        H,
        group="security",
    ),
    key(
        "ssl.keystore.password",
        PASSWORD,
        None,
        "Not allowed with PEM (as in Kafka): an encrypted key's password is ssl.key.password.",
        LO,
        group="security",
    ),
    key("ssl.key.password", PASSWORD, None, "Password of an encrypted PEM private key.", H, group="security"),
    key(
        "ssl.truststore.type",
        STR,
        "PEM",
        "Format of the trust store; PEM only.",
        M,
        one_of("PEM"),
        group="security",
    ),
    key(
        "ssl.truststore.location",
        STR,
        None,
        "PEM file of the CA certificates client certificates are verified against.",
        H,
        group="security",
    ),
    key(
        "ssl.truststore.certificates",
        STR,
        None,
        "The trusted CA certificates inline, PEM.",
        H,
        group="security",
    ),
    key(
        "ssl.truststore.password",
        PASSWORD,
        None,
        "Not allowed with PEM (as in Kafka).",
        LO,
        group="security",
    ),
    key(
        "ssl.client.auth",
        STR,
        "none",
        "Client certificates: required, requested (verified when sent) or none.",
        M,
        one_of("required", "requested", "none"),
        group="security",
    ),
    key(
        "ssl.enabled.protocols",
        LST,
        ["TLSv1.2", "TLSv1.3"],
        "TLS versions accepted (TLSv1.2, TLSv1.3).",
        M,
        one_of("TLSv1.2", "TLSv1.3"),
        group="security",
    ),
    key(
        "ssl.protocol",
        STR,
        "TLSv1.3",
        "Kafka's SSLContext protocol; kafkad negotiates within ssl.enabled.protocols.",
        M,
        one_of("TLS", "TLSv1.2", "TLSv1.3"),
        group="security",
    ),
    key(
        "ssl.cipher.suites",
        LST,
        [],
        "TLS 1.2 cipher suites (IANA or OpenSSL names); empty = OpenSSL's defaults.",
        LO,
        group="security",
    ),
    key(
        "ssl.endpoint.identification.algorithm",
        STR,
        "https",
        "Host name verification of the brokers this broker connects to (https or empty).",
        LO,
        one_of("https", ""),
        group="security",
    ),
    key(
        "ssl.principal.mapping.rules",
        STR,
        "DEFAULT",
        "Certificate DN -> principal name; only DEFAULT (the whole DN, Kafka's default).",
        LO,
        one_of("DEFAULT"),
        group="security",
    ),
    key(
        "sasl.enabled.mechanisms",
        LST,
        [],
        "SASL mechanisms of SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); required with one.",
        M,
        _mechanisms,
        group="security",
    ),
    key(
        "sasl.mechanism.inter.broker.protocol",
        STR,
        "PLAIN",
        "SASL mechanism brokers authenticate to each other with (Kafka's default GSSAPI is not supported).",
        M,
        one_of(*SASL_MECHANISMS),
        group="security",
    ),
    key(
        "security.inter.broker.protocol",
        STR,
        "PLAINTEXT",
        "Protocol brokers talk to each other with: the listener of that name (or inter.broker.listener.name).",
        M,
        one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        group="security",
    ),
    key(
        "inter.broker.listener.name",
        STR,
        None,
        "Listener brokers talk to each other on (default: the first PLAINTEXT listener).",
        M,
        group="security",
    ),
    key(
        "sasl.jaas.config",
        PASSWORD,
        None,
        "JAAS login module of every SASL listener without a listener.name.<l>.<mech>.sasl.jaas.config.",
        M,
        group="security",
    ),
    key(
        "connections.max.reauth.ms",
        LONG,
        0,
        "SASL session lifetime (KIP-368): clients re-authenticate within it; 0 = no limit.",
        M,
        at_least(0),
        group="security",
    ),
    key(
        "authorizer.class.name",
        STR,
        "",
        "kafka.security.authorizer.AclAuthorizer turns ACLs on; empty = no authorization.",
        H,
        one_of("", *ACL_AUTHORIZERS),
        group="security",
    ),
    key(
        "super.users",
        STR,
        "",
        "Principals allowed everything, as User:a;User:b.",
        M,
        group="security",
    ),
    key(
        "allow.everyone.if.no.acl.found",
        BOOL,
        False,
        "With an authorizer: a resource without any ACL is open to everyone.",
        M,
        group="security",
    ),
)
