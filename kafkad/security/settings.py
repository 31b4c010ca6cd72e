"""Security settings per listener, from the broker's keys: protocol, TLS material, SASL mechanisms and users.

Kafka's forms are honoured as written: `listener.security.protocol.map`, `ssl.*` (PEM key/trust stores, as
files or inline), `listener.name.<listener>.ssl.*` overrides, `sasl.enabled.mechanisms`, JAAS login modules
(`listener.name.<listener>.<mechanism>.sasl.jaas.config` or `sasl.jaas.config`, PlainLoginModule's
`user_<name>="<password>"` options declaring PLAIN users), the AclAuthorizer and `super.users`. Anything
kafkad cannot honour raises SecurityConfigError(key, message); config.py adds the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type only: at run time security.settings imports nothing of the daemon's
    from kafkad.config.defs import ConfigValue

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_MODULE_OF = {"PLAIN": PLAIN_MODULE, "SCRAM-SHA-256": SCRAM_MODULE, "SCRAM-SHA-512": SCRAM_MODULE}

# listener.name.<listener>.<rest>: rest is an ssl.* key, sasl.enabled.mechanisms, or <mech>.sasl.jaas.config
LISTENER_KEY = re.compile(r"^listener\.name\.([a-z0-9_]+)\.(.+)$")
_JAAS_KEY = re.compile(r"^(plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config$")


# The https:// metrics endpoints' TLS settings: the broker-wide ssl.* keys, overridden by
# listener.name.metrics.ssl.* like a listener's.
METRICS_TLS = "METRICS"


class SecurityConfigError(Exception):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key, self.message = key, message


class Protocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (Protocol.SSL, Protocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (Protocol.SASL_PLAINTEXT, Protocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """One listener's TLS material and policy; `keys` maps each field to the key it came from (errors)."""

    keystore_location: str | None
    keystore_key: str | None
    keystore_chain: str | None
    key_password: str | None
    truststore_location: str | None
    truststore_certificates: str | None
    client_auth: str  # required | requested | none
    protocols: tuple[str, ...]
    cipher_suites: tuple[str, ...]
    keys: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JaasEntry:
    module: str
    flag: str
    options: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    name: str
    protocol: Protocol
    tls: TlsSettings | None
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]  # PLAIN: user -> password from the JAAS user_<name> options


@dataclass(frozen=True, slots=True)
class InterBroker:
    """How this broker reaches the others: their `listener` (inter.broker.listener.name, or the listener
    named by security.inter.broker.protocol), its TLS material, the SASL mechanism and this broker's login
    (username/password of that listener's JAAS entry for sasl.mechanism.inter.broker.protocol)."""

    listener: str
    protocol: Protocol
    tls: TlsSettings | None
    mechanism: str
    username: str
    password: str
    verify_host: bool


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    listeners: Mapping[str, ListenerSecurity]
    authorizer: bool
    super_users: frozenset[str]
    allow_if_no_acl: bool
    reauth_ms: int
    inter_broker_mechanism: str
    metrics_tls: TlsSettings | None = None
    inter_broker: InterBroker | None = None  # None: the first PLAINTEXT listener (standalone: unused)

    @property
    def plaintext_only(self) -> bool:
        return (
            all(ls.protocol is Protocol.PLAINTEXT for ls in self.listeners.values()) and not self.authorizer
        )


def parse_jaas(text: str, key: str) -> JaasEntry:
    """`<module> <flag> k=v k="v" ...;` (one login module, as Kafka's sasl.jaas.config takes)."""
    m = re.match(r"^\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b(.*)$", text, re.S)
    if not m:
        raise SecurityConfigError(key, "not a JAAS login module entry: '<LoginModule> required k=\"v\" ...;'")
    rest = m.group(3)
    options: dict[str, str] = {}
    pos = 0
    opt = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')
    while True:
        o = opt.match(rest, pos)
        if not o:
            break
        value = o.group(2)
        options[o.group(1)] = re.sub(r"\\(.)", r"\1", value) if value is not None else o.group(3)
        pos = o.end()
    tail = rest[pos:].strip()
    if tail != ";":
        raise SecurityConfigError(
            key, f"JAAS entry must end with ';' after its options (one login module), got {tail[:30]!r}"
        )
    return JaasEntry(m.group(1), m.group(2), options)


_TLS13 = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")


def build_security(
    values: Mapping[str, ConfigValue],
    listener_names: tuple[str, ...],
    validate_tls: Callable[[TlsSettings], object] | None = None,
) -> SecurityConfig:
    """`values`: every key by name (table keys and listener.name.* pattern keys); raises SecurityConfigError."""

    def s(name: str) -> str | None:
        x = values.get(name)
        return x if isinstance(x, str) and x != "" else None

    pmap: dict[str, Protocol] = {}
    for item in values.get("listener.security.protocol.map") or []:  # type: ignore[union-attr]
        lname, sep, pname = str(item).partition(":")
        if not sep or pname.upper() not in Protocol.__members__:
            raise SecurityConfigError(
                "listener.security.protocol.map",
                f"{item!r} is not LISTENER:PROTOCOL with PROTOCOL one of {', '.join(Protocol.__members__)}",
            )
        pmap[lname.strip().upper()] = Protocol[pname.upper()]
    for name in listener_names:
        if name not in pmap:
            raise SecurityConfigError(
                "listeners", f"listener {name} has no entry in listener.security.protocol.map"
            )
    for k in values:
        m = LISTENER_KEY.match(k)
        if m and m.group(1).upper() not in listener_names and m.group(1).upper() != METRICS_TLS:
            raise SecurityConfigError(k, f"no listener named {m.group(1).upper()} in listeners")

    def lkey(listener: str, name: str) -> str:
        """The listener-prefixed key when set, else the broker-wide one."""
        specific = f"listener.name.{listener.lower()}.{name}"
        return specific if specific in values else name

    if s("ssl.keystore.password") is not None:
        raise SecurityConfigError(
            "ssl.keystore.password",
            "a PEM key store takes no password; an encrypted key's is ssl.key.password",
        )
    if s("ssl.truststore.password") is not None:
        raise SecurityConfigError("ssl.truststore.password", "a PEM trust store takes no password")

    listeners: dict[str, ListenerSecurity] = {}
    for name in listener_names:
        proto = pmap[name]
        tls = _tls_settings(values, name, lkey) if proto.tls else None
        if tls is not None and validate_tls is not None:
            validate_tls(tls)
        mechs: tuple[str, ...] = ()
        plain_users: dict[str, str] = {}
        if proto.sasl:
            mk = lkey(name, "sasl.enabled.mechanisms")
            raw = values.get(mk)
            mechs = tuple(raw) if isinstance(raw, list) else ()
            if not mechs:
                raise SecurityConfigError(
                    mk,
                    f"listener {name} is {proto.value}: set the SASL mechanisms (Kafka's default GSSAPI is not supported)",
                )
            for mech in mechs:
                jk = f"listener.name.{name.lower()}.{mech.lower()}.sasl.jaas.config"
                if jk not in values:
                    jk = "sasl.jaas.config"
                text = values.get(jk)
                if not isinstance(text, str) or not text:
                    if mech == "PLAIN":
                        raise SecurityConfigError(
                            f"listener.name.{name.lower()}.plain.sasl.jaas.config",
                            f"listener {name} enables PLAIN: declare its users with "
                            f'{PLAIN_MODULE} required user_<name>="<password>";',
                        )
                    continue
                entry = parse_jaas(text, jk)
                if entry.module != _MODULE_OF[mech]:
                    if jk == "sasl.jaas.config" and mech != "PLAIN":
                        continue  # the broker-wide entry serves the mechanism whose module it names
                    raise SecurityConfigError(jk, f"{mech} needs {_MODULE_OF[mech]}, not {entry.module}")
                if mech == "PLAIN":
                    plain_users.update(
                        {k[5:]: v for k, v in entry.options.items() if k.startswith("user_") and len(k) > 5}
                    )
        listeners[name] = ListenerSecurity(name, proto, tls, mechs, plain_users)

    inter_broker = _inter_broker(values, listeners, s)
    metrics_tls = None
    urls = values.get("metrics.listeners")
    for url in urls if isinstance(urls, list) else ():
        scheme = url.split("://", 1)[0].lower() if "://" in url else "http"
        if scheme not in ("http", "https"):
            raise SecurityConfigError(
                "metrics.listeners", f"{url!r}: only http:// and https:// are supported"
            )
        if scheme == "https" and metrics_tls is None:
            metrics_tls = _tls_settings(values, METRICS_TLS, lkey)
            if validate_tls is not None:
                validate_tls(metrics_tls)
    super_users = frozenset(p.strip() for p in (s("super.users") or "").split(";") if p.strip())
    for p in super_users:
        if ":" not in p:
            raise SecurityConfigError("super.users", f"{p!r} is not a principal (e.g. User:alice)")
    reauth = values.get("connections.max.reauth.ms")
    return SecurityConfig(
        listeners=listeners,
        authorizer=s("authorizer.class.name") is not None,
        super_users=super_users,
        allow_if_no_acl=bool(values.get("allow.everyone.if.no.acl.found")),
        reauth_ms=reauth if isinstance(reauth, int) else 0,
        inter_broker_mechanism=s("sasl.mechanism.inter.broker.protocol") or "PLAIN",
        metrics_tls=metrics_tls,
        inter_broker=inter_broker,
    )


def _inter_broker(
    values: Mapping[str, ConfigValue],
    listeners: Mapping[str, ListenerSecurity],
    s: Callable[[str], str | None],
) -> InterBroker | None:
    ib, proto = s("inter.broker.listener.name"), s("security.inter.broker.protocol") or "PLAINTEXT"
    key = "inter.broker.listener.name" if ib is not None else "security.inter.broker.protocol"
    name = ib.upper() if ib is not None else (proto if proto != "PLAINTEXT" else None)
    if name is None:
        if s("zookeeper.connect") is not None and not any(
            ls.protocol is Protocol.PLAINTEXT for ls in listeners.values()
        ):
            raise SecurityConfigError(
                "listeners", "cluster mode without a PLAINTEXT listener needs inter.broker.listener.name"
            )
        return None
    ls = listeners.get(name)
    if ls is None:
        raise SecurityConfigError(key, f"no listener named {name} in listeners")
    mech, user, password = "", "", ""
    if ls.protocol.sasl:
        mech = s("sasl.mechanism.inter.broker.protocol") or "PLAIN"
        if mech not in ls.mechanisms:
            raise SecurityConfigError(
                "sasl.mechanism.inter.broker.protocol", f"{mech} is not enabled on listener {name}"
            )
        jk = f"listener.name.{name.lower()}.{mech.lower()}.sasl.jaas.config"
        jk = jk if jk in values else "sasl.jaas.config"
        text = values.get(jk)
        opts = parse_jaas(text, jk).options if isinstance(text, str) and text else {}
        user, password = opts.get("username", ""), opts.get("password", "")
        if not user or not password:
            raise SecurityConfigError(
                jk, f"brokers log in to {name} with {mech}: set username and password here"
            )
    verify = s("ssl.endpoint.identification.algorithm") == "https"
    return InterBroker(name, ls.protocol, ls.tls, mech, user, password, verify)


def _tls_settings(
    values: Mapping[str, ConfigValue], listener: str, lkey: Callable[[str, str], str]
) -> TlsSettings:
    keys = {
        f: lkey(listener, k)
        for f, k in (
            ("keystore_location", "ssl.keystore.location"),
            ("keystore_key", "ssl.keystore.key"),
            ("keystore_chain", "ssl.keystore.certificate.chain"),
            ("key_password", "ssl.key.password"),
            ("truststore_location", "ssl.truststore.location"),
            ("truststore_certificates", "ssl.truststore.certificates"),
            ("client_auth", "ssl.client.auth"),
            ("protocols", "ssl.enabled.protocols"),
            ("cipher_suites", "ssl.cipher.suites"),
        )
    }

    def s(f: str) -> str | None:
        x = values.get(keys[f])
        return x if isinstance(x, str) and x != "" else None

    def lst(f: str) -> tuple[str, ...]:
        x = values.get(keys[f])
        return tuple(x) if isinstance(x, list) else ()

    t = TlsSettings(
        keystore_location=s("keystore_location"),
        keystore_key=s("keystore_key"),
        keystore_chain=s("keystore_chain"),
        key_password=s("key_password"),
        truststore_location=s("truststore_location"),
        truststore_certificates=s("truststore_certificates"),
        client_auth=s("client_auth") or "none",
        protocols=lst("protocols") or ("TLSv1.2", "TLSv1.3"),
        cipher_suites=lst("cipher_suites"),
        keys=keys,
    )
    if t.keystore_location is None and t.keystore_key is None:
        raise SecurityConfigError(
            keys["keystore_location"], f"listener {listener} uses TLS: set ssl.keystore.location (PEM)"
        )
    if t.keystore_location is not None and t.keystore_key is not None:
        raise SecurityConfigError(
            keys["keystore_key"], "set ssl.keystore.location or ssl.keystore.key, not both"
        )
    if t.keystore_key is not None and t.keystore_chain is None:
        raise SecurityConfigError(
            keys["keystore_chain"], "ssl.keystore.key needs ssl.keystore.certificate.chain"
        )
    if t.client_auth != "none" and t.truststore_location is None and t.truststore_certificates is None:
        raise SecurityConfigError(
            keys["client_auth"],
            f"ssl.client.auth={t.client_auth} needs a trust store (ssl.truststore.location)",
        )
    tls13 = [c for c in t.cipher_suites if c in _TLS13]
    if tls13 and "TLSv1.3" in t.protocols and set(tls13) != set(_TLS13):
        raise SecurityConfigError(
            keys["cipher_suites"],
            "Python's ssl module cannot narrow the TLS 1.3 suites: list all of "
            f"{', '.join(_TLS13)} or none (none disables TLS 1.3)",
        )
    return t


def pattern_key_base(name: str) -> str | None:
    """The table key a listener.name.* pattern key stands for ("ssl.client.auth", "sasl.jaas.config"), or
    None when kafkad has no such per-listener key."""
    m = LISTENER_KEY.match(name)
    if not m:
        return None
    rest = m.group(2)
    if _JAAS_KEY.match(rest):
        return "sasl.jaas.config"
    if rest.startswith("ssl.") or rest == "sasl.enabled.mechanisms":
        return rest
    return None
