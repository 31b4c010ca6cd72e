"""How the brokers' ZooKeeper client authenticates: SASL DIGEST-MD5 from a JAAS file, mutual TLS, ACL policy.

As a ZooKeeper-mode Kafka does it:
- SASL: the JAAS file named by `java.security.auth.login.config` (the broker key, else
  `-Djava.security.auth.login.config=FILE` in KAFKA_OPTS, where Kafka's units put it); its `Client` section
  (`zookeeper.sasl.clientconfig`) holds a DigestLoginModule username/password, which log in with DIGEST-MD5.
  `zookeeper.sasl.client=false` turns it off. No Client section: no SASL (Kafka's JaasUtils.isZkSaslEnabled).
- TLS: `zookeeper.ssl.client.enable` with the PEM key store / trust store keys; the context is built here,
  once, so a bad file is an error naming its key before anything connects.
- `zookeeper.set.acl=true` needs one of them (Kafka refuses it otherwise): the znodes' ACLs name the
  brokers' authenticated identity (see zk_acls.py).

Blocking only at config time (reads the JAAS and PEM files); the result is immutable.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkad.security.settings import SecurityConfigError

if TYPE_CHECKING:
    from kafkad.config.defs import ConfigValue

DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
LOGIN_CONFIG = "java.security.auth.login.config"
SASL_CLIENT = "zookeeper.sasl.client"
SASL_SECTION = "zookeeper.sasl.clientconfig"
SET_ACL = "zookeeper.set.acl"
KAFKA_OPTS = "KAFKA_OPTS"
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True, slots=True)
class JaasLogin:
    module: str
    flag: str
    options: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ZkSasl:
    username: str
    password: str
    where: str  # "the Client section of FILE (java.security.auth.login.config from KAFKA_OPTS)": errors


@dataclass(frozen=True, slots=True)
class ZkTls:
    context: ssl.SSLContext
    client_cert: bool  # a key store is configured: the certificate's subject is our identity (x509)
    where: str  # the keys to check when the handshake fails


@dataclass(frozen=True, slots=True)
class ZkSecurity:
    sasl: ZkSasl | None = None
    tls: ZkTls | None = None
    set_acl: bool = False

    @property
    def authenticated(self) -> bool:
        """The session carries an identity ZooKeeper ACLs can name (Kafka's isZkSecurityEnabled)."""
        return self.sasl is not None or (self.tls is not None and self.tls.client_cert)


NO_SECURITY = ZkSecurity()


# --- JAAS files (Java's ConfigFile syntax) ------------------------------------------------------------
_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"((?:[^"\\]|\\.)*)"|([{};=])|([^\s{};="]+)', re.S)


def _tokens(text: str, path: str) -> list[tuple[str, str]]:
    """('q', quoted) / ('p', punctuation) / ('w', word); comments and blanks dropped."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"{path}: cannot read the JAAS file at {text[pos : pos + 20]!r}")
        if m.group(1) is not None:
            out.append(("q", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            out.append(("p", m.group(2)))
        elif m.group(3) is not None:
            out.append(("w", m.group(3)))
        pos = m.end()
    return out


def parse_jaas_file(text: str, path: str = "JAAS file") -> dict[str, list[JaasLogin]]:
    """`Name { module flag k=v k="v"; ... };` sections -> their login modules. ValueError when malformed."""
    toks = _tokens(text, path)
    sections: dict[str, list[JaasLogin]] = {}
    i = 0

    def take(kind: str, value: str | None = None) -> str:
        nonlocal i
        if i >= len(toks) or toks[i][0] not in kind or (value is not None and toks[i][1] != value):
            got = repr(toks[i][1]) if i < len(toks) else "the end"
            raise ValueError(f"{path}: expected {value or 'a name'} in the JAAS file, found {got}")
        i += 1
        return toks[i - 1][1]

    while i < len(toks):
        name = take("wq")
        take("p", "{")
        logins: list[JaasLogin] = []
        while not (toks[i:] and toks[i] == ("p", "}")):
            module = take("w")
            flag = take("w")
            if flag not in ("required", "requisite", "sufficient", "optional"):
                raise ValueError(f"{path}: section {name}: {module} has flag {flag!r}, not required/optional")
            options: dict[str, str] = {}
            while not (toks[i:] and toks[i] == ("p", ";")):
                k = take("w")
                take("p", "=")
                options[k] = take("wq")
            take("p", ";")
            logins.append(JaasLogin(module, flag, options))
        take("p", "}")
        take("p", ";")
        sections[name] = logins
    return sections


def kafka_opts_properties(kafka_opts: str) -> dict[str, str]:
    """The `-Dname=value` system properties of a KAFKA_OPTS string."""
    out: dict[str, str] = {}
    with contextlib.suppress(ValueError):  # unbalanced quotes: a JVM would not start either; ignore
        for word in shlex.split(kafka_opts):
            if word.startswith("-D") and "=" in word:
                k, _, v = word[2:].partition("=")
                out[k] = v
    return out


# --- settings -> ZkSecurity -----------------------------------------------------------------------------
def build_zk_security(values: Mapping[str, ConfigValue], environ: Mapping[str, str]) -> ZkSecurity:
    """The ZooKeeper client's security from the broker keys and the environment; SecurityConfigError
    naming the key at fault."""
    jvm = kafka_opts_properties(environ.get(KAFKA_OPTS, ""))
    sasl = _sasl(values, jvm)
    tls = _tls(values)
    set_acl = bool(values.get(SET_ACL))
    security = ZkSecurity(sasl, tls, set_acl)
    if set_acl and not security.authenticated:
        raise SecurityConfigError(
            SET_ACL,
            "is true, but kafkad has no ZooKeeper identity for the ACLs: give it a JAAS file with a "
            f"Client section ({LOGIN_CONFIG}, or -D{LOGIN_CONFIG}=FILE in KAFKA_OPTS) or a client "
            "certificate (zookeeper.ssl.client.enable=true and zookeeper.ssl.keystore.location)",
        )
    return security


def _text(values: Mapping[str, ConfigValue], key: str) -> str | None:
    v = values.get(key)
    return v if isinstance(v, str) and v != "" else None


def _sasl(values: Mapping[str, ConfigValue], jvm: Mapping[str, str]) -> ZkSasl | None:
    path, origin = _text(values, LOGIN_CONFIG), LOGIN_CONFIG
    if path is None and jvm.get(LOGIN_CONFIG):
        path, origin = jvm[LOGIN_CONFIG], f"-D{LOGIN_CONFIG} in {KAFKA_OPTS}"
    if path is None:
        return None
    section = _text(values, SASL_SECTION) or "Client"
    if section == "Client":  # the key's default: a -D in KAFKA_OPTS may name another section
        section = jvm.get(SASL_SECTION) or section
    enabled = bool(values.get(SASL_CLIENT, True)) and jvm.get(SASL_CLIENT, "true").lower() != "false"
    try:
        with open(path, encoding="utf-8") as f:
            sections = parse_jaas_file(f.read(), path)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SecurityConfigError(LOGIN_CONFIG, f"cannot read the JAAS file {path} ({origin}): {e}") from None
    logins = sections.get(section)
    if logins is None:
        return None  # a JAAS file for the listeners only: no SASL to ZooKeeper (as Kafka)
    where = f"the {section} section of {path} ({origin})"
    if not enabled:
        raise SecurityConfigError(
            SASL_CLIENT, f"is false, but {where} is present (Kafka refuses this combination too)"
        )
    digest = [x for x in logins if x.module == DIGEST_MODULE]
    if not digest:
        modules = ", ".join(x.module for x in logins) or "no login module"
        raise SecurityConfigError(
            LOGIN_CONFIG, f"{where} has {modules}: kafkad logs in to ZooKeeper with {DIGEST_MODULE} only"
        )
    user, password = digest[0].options.get("username"), digest[0].options.get("password")
    if not user or password is None:
        raise SecurityConfigError(LOGIN_CONFIG, f"{where}: {DIGEST_MODULE} needs username and password")
    return ZkSasl(user, password, where)


def _tls(values: Mapping[str, ConfigValue]) -> ZkTls | None:
    if not values.get("zookeeper.ssl.client.enable"):
        return None
    for k in ("zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable"):
        if values.get(k):
            raise SecurityConfigError(k, "revocation checks are not supported by kafkad's ZooKeeper client")
    protocols = values.get("zookeeper.ssl.enabled.protocols")
    if not isinstance(protocols, list) or not protocols:
        p = _text(values, "zookeeper.ssl.protocol") or "TLSv1.2"
        protocols = ["TLSv1.2", "TLSv1.3"] if p == "TLS" else [p]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    versions = sorted(_VERSIONS[p] for p in protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ctx.check_hostname = (_text(values, "zookeeper.ssl.endpoint.identification.algorithm") or "").upper() == (
        "HTTPS"
    )
    suites = values.get("zookeeper.ssl.cipher.suites")
    if isinstance(suites, list) and suites:
        # Kafka's IANA suite names -> OpenSSL's (kafkad.security.tls: only a ZooKeeper TLS config loads it)
        from kafkad.security.tls import _IANA_TO_OPENSSL

        try:
            ctx.set_ciphers(":".join(_IANA_TO_OPENSSL.get(c, c) for c in suites))
        except ssl.SSLError:
            raise SecurityConfigError(
                "zookeeper.ssl.cipher.suites", f"no cipher suite of {', '.join(suites)} is known to OpenSSL"
            ) from None
    keystore = _text(values, "zookeeper.ssl.keystore.location")
    truststore = _text(values, "zookeeper.ssl.truststore.location")
    if keystore is not None:
        try:
            ctx.load_cert_chain(keystore, password=_text(values, "zookeeper.ssl.keystore.password"))
        except (OSError, ssl.SSLError, ValueError) as e:
            raise SecurityConfigError(
                "zookeeper.ssl.keystore.location", f"cannot load the PEM key store {keystore}: {e}"
            ) from None
    try:
        if truststore is not None:
            ctx.load_verify_locations(cafile=truststore)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except (OSError, ssl.SSLError, ValueError) as e:
        raise SecurityConfigError(
            "zookeeper.ssl.truststore.location", f"cannot load the PEM trust store {truststore}: {e}"
        ) from None
    where = "zookeeper.ssl.keystore.location, zookeeper.ssl.truststore.location"
    return ZkTls(ctx, keystore is not None, where)


# --- kazoo -----------------------------------------------------------------------------------------------
def kazoo_options(security: ZkSecurity, on_gave_up: Callable[[], None] | None = None) -> dict[str, Any]:
    """KazooClient keyword arguments for `security` (SASL options, the connection handler)."""
    out: dict[str, Any] = {
        "handler": kazoo_handler(security.tls.context if security.tls else None, on_gave_up)
    }
    if security.sasl is not None:
        out["sasl_options"] = {
            "mechanism": "DIGEST-MD5",
            "username": security.sasl.username,
            "password": security.sasl.password,
        }
    if security.tls is not None:
        out["use_ssl"] = True  # kazoo then reads the socket the TLS way (pending bytes)
    return out


def kazoo_handler(tls: ssl.SSLContext | None, on_gave_up: Callable[[], None] | None = None) -> Any:
    """kazoo's threading handler, with two changes:
    - sockets are TLS from `tls` when given (kazoo's own use_ssl builds its context from file names only:
      no TLS version, suite or key password control, and the system CAs always trusted);
    - its connection thread (ConnectionHandler.zk_loop) ends quietly when kazoo gives up (a refused SASL login raises out of it after
      kazoo has logged the error and closed the session), not with a second traceback on stderr, and
      `on_gave_up()` runs (on that thread) whenever the thread ends: kazoo never reconnects by itself then."""
    from kazoo.handlers.threading import SequentialThreadingHandler

    class Handler(SequentialThreadingHandler):  # type: ignore[misc]
        def spawn(self, func: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(func, "__name__", "") != "zk_loop":  # the callback workers: as kazoo has them
                return super().spawn(func, *args, **kwargs)

            def guarded() -> None:
                try:
                    with contextlib.suppress(Exception):
                        func(*args, **kwargs)
                finally:
                    if on_gave_up is not None:
                        on_gave_up()

            return super().spawn(guarded)

        def create_connection(self, address: tuple[str, int], *args: Any, **kwargs: Any) -> Any:
            if tls is None:
                return super().create_connection(address, *args, **kwargs)
            hostname, timeout = kwargs.get("hostname"), kwargs.get("timeout")
            raw = socket.create_connection(address, timeout)
            try:
                sock = tls.wrap_socket(raw, server_hostname=hostname or address[0])
            except BaseException:
                raw.close()
                raise
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock

    return Handler()
