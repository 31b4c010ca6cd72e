"""Server SSLContexts of TLS listeners, from PEM key and trust stores, and their reload without a restart.

A context is built once per TLS listener. `TlsReloader.reload()` (SIGHUP, or the file watcher noticing a
changed mtime) loads the PEM files again *into the same contexts*: OpenSSL's SSL_CTX_use_certificate
replaces the certificate and key for every handshake that starts afterwards, while open connections keep
theirs. A reload that fails (a half-written file) logs and keeps the old material. The CA list only grows
on reload (OpenSSL has no "remove CA"); a CA that must go away needs a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kafkad.security.settings import SecurityConfigError, TlsSettings

log = logging.getLogger(__name__)

# Kafka (JSSE) names TLS 1.2 suites the IANA way; OpenSSL has its own names.
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """Inline PEM as a private temporary file (ssl's load_cert_chain reads files only)."""
    fd, path = tempfile.mkstemp(prefix="kafkad-pem-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text.replace("\\n", "\n"))
        yield path
    finally:
        os.unlink(path)


def _load_material(ctx: ssl.SSLContext, t: TlsSettings) -> None:
    """Key, chain and CAs into `ctx`; raises SecurityConfigError naming the key at fault."""
    try:
        if t.keystore_location is not None:
            ctx.load_cert_chain(t.keystore_location, password=t.key_password)
        else:
            assert t.keystore_key is not None and t.keystore_chain is not None
            with _pem_file(t.keystore_chain + "\n" + t.keystore_key) as path:
                ctx.load_cert_chain(path, password=t.key_password)
    except (OSError, ssl.SSLError, ValueError) as e:
        k = t.keys["keystore_location" if t.keystore_location is not None else "keystore_key"]
        raise SecurityConfigError(k, f"cannot load the PEM key store: {e}") from None
    try:
        if t.truststore_location is not None:
            ctx.load_verify_locations(cafile=t.truststore_location)
        elif t.truststore_certificates is not None:
            ctx.load_verify_locations(cadata=t.truststore_certificates.replace("\\n", "\n"))
    except (OSError, ssl.SSLError, ValueError) as e:
        k = t.keys["truststore_location" if t.truststore_location is not None else "truststore_certificates"]
        raise SecurityConfigError(k, f"cannot load the PEM trust store: {e}") from None


def build_context(t: TlsSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[p] for p in t.protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if t.cipher_suites:
        tls12 = [c for c in t.cipher_suites if c not in _TLS13_SUITES]
        names = [_IANA_TO_OPENSSL.get(c, c) for c in tls12]
        if names:
            try:
                ctx.set_ciphers(":".join(names))
            except ssl.SSLError:
                raise SecurityConfigError(
                    t.keys["cipher_suites"], f"no cipher suite of {', '.join(tls12)} is known to OpenSSL"
                ) from None
            known = {c["name"] for c in ctx.get_ciphers()}
            unknown = [c for c, n in zip(tls12, names, strict=True) if n not in known]
            if unknown:
                raise SecurityConfigError(
                    t.keys["cipher_suites"], f"unknown cipher suite {', '.join(unknown)}"
                )
        if not any(c in _TLS13_SUITES for c in t.cipher_suites):
            # JSSE negotiates no TLS 1.3 without a TLS 1.3 suite; neither do we.
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            if ctx.minimum_version > ctx.maximum_version:
                raise SecurityConfigError(t.keys["cipher_suites"], "no suite for the enabled TLS versions")
    ctx.verify_mode = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL}.get(
        t.client_auth, ssl.CERT_NONE
    )
    _load_material(ctx, t)
    return ctx


def _files(t: TlsSettings) -> tuple[str, ...]:
    return tuple(p for p in (t.keystore_location, t.truststore_location) if p is not None)


def _mtimes(paths: tuple[str, ...]) -> tuple[float, ...]:
    out = []
    for p in paths:
        try:
            out.append(os.stat(p).st_mtime)
        except OSError:
            out.append(-1.0)
    return tuple(out)


@dataclass(slots=True)
class _Entry:
    settings: TlsSettings
    context: ssl.SSLContext
    mtimes: tuple[float, ...]


class TlsReloader:
    """The listeners' contexts; `reload` re-reads their PEM files into them; `watch` polls mtimes."""

    def __init__(self, settings: Mapping[str, TlsSettings]) -> None:
        self._entries = {
            name: _Entry(t, build_context(t), _mtimes(_files(t))) for name, t in settings.items()
        }
        self.reloads = 0

    def context(self, listener: str) -> ssl.SSLContext:
        return self._entries[listener].context

    def reload(self, only_changed: bool = False) -> int:
        """Load every (or every changed) listener's PEM files again; returns how many were reloaded."""
        n = 0
        for name, e in self._entries.items():
            mtimes = _mtimes(_files(e.settings))
            if only_changed and mtimes == e.mtimes:
                continue
            try:
                _load_material(e.context, e.settings)
            except SecurityConfigError as err:
                log.error("listener %s: certificate reload failed, keeping the old one: %s", name, err)
                continue
            e.mtimes = mtimes
            n += 1
            log.info("listener %s: certificates reloaded", name)
        self.reloads += n
        return n

    async def watch(self, interval_s: float = 5.0) -> None:
        """Reload the listeners whose PEM files changed; runs until cancelled. On the loop's thread, not an
        executor: handshakes start from these contexts on the loop, and a few KB of PEM parse in a
        millisecond."""
        while True:
            await asyncio.sleep(interval_s)
            self.reload(only_changed=True)
