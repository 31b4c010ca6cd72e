"""The per-connection security session of TLS and SASL listeners, and the gate in front of the dispatcher.

PLAINTEXT listeners have no session: their connections call the dispatcher directly and every request is
User:ANONYMOUS (no extra work per request). On TLS and SASL listeners the connection's dispatcher is a
`Session`: it knows the principal (the client certificate's DN on SSL, the SASL user on SASL_*), and on a
SASL listener lets nothing but ApiVersions, SaslHandshake and SaslAuthenticate through until the client
has authenticated (anything else closes the connection, as Kafka does). SaslHandshake v0 clients then
send bare SASL tokens (no Kafka header); those are answered here. A failed authentication answers
SASL_AUTHENTICATION_FAILED and closes. With connections.max.reauth.ms the session expires: the client
re-authenticates (KIP-368, same principal) or its next other request closes the connection.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkad.network.dispatcher import CloseConnection, Dispatcher, Outcome
from kafkad.security.credentials import CredentialStore
from kafkad.security.scram import MECHANISMS, ScramError, ScramServer
from kafkad.security.settings import ListenerSecurity

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
_SASL_APIS = (17, 18, 36)  # SaslHandshake, ApiVersions, SaslAuthenticate


class AuthFailed(Exception):
    pass


class PlainServer:
    """RFC 4616: authzid NUL authcid NUL passwd, checked against the listener's JAAS user_<name> entries."""

    def __init__(self, users: dict[str, str] | Any) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def step(self, data: bytes) -> bytes:
        parts = bytes(data).split(b"\0")
        if len(parts) != 3:
            raise AuthFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if not user:
            raise AuthFailed("Authentication failed: username not specified")
        if authzid and authzid != user:
            raise AuthFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthFailed("Authentication failed: Invalid username or password")
        self.username = user
        self.complete = True
        return b""


@dataclass(frozen=True, slots=True)
class Authenticators:
    """What a listener's sessions authenticate against."""

    listener: ListenerSecurity
    credentials: CredentialStore
    reauth_ms: int

    def server(self, mechanism: str) -> PlainServer | ScramServer:
        if mechanism == "PLAIN":
            return PlainServer(self.listener.plain_users)
        assert mechanism in MECHANISMS
        return ScramServer(mechanism, lambda user: self.credentials.get(user, mechanism))


# Python's getpeercert names attributes by OpenSSL long name; RFC 2253 (Java's X500Principal, hence
# Kafka's principal) by these keywords.
_RFC2253_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _rfc2253_value(v: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in v)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def principal_from_cert(cert: dict[str, Any] | None) -> str:
    """Kafka's DEFAULT mapping: the whole subject DN as RFC 2253 writes it (most specific RDN first,
    CN/OU/O/... keywords, "+" inside a multi-valued RDN, special characters escaped): User:CN=alice,O=Org."""
    if not cert or not cert.get("subject"):
        return ANONYMOUS
    rdns = [
        "+".join(f"{_RFC2253_KEYWORDS.get(k, k)}={_rfc2253_value(v)}" for k, v in rdn)
        for rdn in cert["subject"]
    ]
    return "User:" + ",".join(reversed(rdns))


class Session:
    """Stands in for the Dispatcher on one connection (KafkaConnection calls `dispatch`)."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        auth: Authenticators,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._dispatcher = dispatcher
        self._auth = auth
        self._monotonic = monotonic
        self.listener = auth.listener.name
        self.sasl = auth.listener.protocol.sasl
        self.tls = auth.listener.protocol.tls
        self.mechanisms = auth.listener.mechanisms
        self.principal = ANONYMOUS
        self.authenticated = not self.sasl
        self.mechanism: str | None = None  # chosen by the last SaslHandshake
        self._server: PlainServer | ScramServer | None = None
        self._raw = False  # SaslHandshake v0: the next frames are bare tokens
        self._expires: float | None = None
        self.close_after = False  # the response being built is the last (failed authentication)
        self.tls_peer: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._auth.listener.protocol.tls:
            cert = transport.get_extra_info("peercert")
            if not self.sasl:
                self.principal = principal_from_cert(cert)

    # --- the gate ----------------------------------------------------------------------------------
    def dispatch(self, frame: bytearray, peer: str) -> Outcome | asyncio.Task[Outcome]:
        if self._raw:
            return self._raw_token(frame, peer)
        if self.authenticated and (self._expires is None or self._monotonic() < self._expires):
            outcome = self._dispatcher.dispatch(frame, peer, self)
            if self.close_after:  # a failed re-authentication closes the connection (KIP-368), as Kafka
                assert not isinstance(outcome, asyncio.Task)
                raise CloseConnection("SASL re-authentication failed", last=outcome)
            return outcome
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if api_key not in _SASL_APIS:
            if self.authenticated:
                raise CloseConnection(f"SASL session of {self.principal} expired; not re-authenticated")
            raise CloseConnection(f"request (api key {api_key}) before SASL authentication")
        outcome = self._dispatcher.dispatch(frame, peer, self)
        if self.close_after:
            assert not isinstance(outcome, asyncio.Task)
            raise CloseConnection("SASL authentication failed", last=outcome)
        return outcome

    # --- SaslHandshake / SaslAuthenticate (called by their handlers) ----------------------------------
    def handshake(self, mechanism: str, version: int) -> bool:
        """True when `mechanism` is enabled here; v0 switches to bare tokens."""
        if mechanism not in self._auth.listener.mechanisms:
            self.close_after = True
            return False
        self.mechanism = mechanism
        self._server = self._auth.server(mechanism)
        self._raw = version == 0
        return True

    def authenticate(self, token: bytes) -> tuple[bytes, int]:
        """One SASL step: (challenge, session lifetime ms once complete); raises AuthFailed."""
        server = self._server
        if server is None:
            raise AuthFailed("SaslAuthenticate before SaslHandshake")
        try:
            challenge = server.step(token)
        except (ScramError, AuthFailed) as e:
            self._server = None
            raise AuthFailed(str(e)) from None
        if not server.complete:
            return challenge, 0
        self._server = None
        user = f"User:{server.username}"
        if self.authenticated and self.principal != user:
            raise AuthFailed("Cannot change principals during re-authentication")
        self.principal = user
        self.authenticated = True
        lifetime = self._auth.reauth_ms
        self._expires = self._monotonic() + lifetime / 1000 if lifetime > 0 else None
        log.info("%s authenticated with %s on %s", user, self.mechanism, self.listener)
        return challenge, lifetime

    def _raw_token(self, frame: bytearray, peer: str) -> Outcome:
        """SaslHandshake v0: a bare token in, a bare (size-prefixed) token out; failure just closes."""
        try:
            challenge, _ = self.authenticate(bytes(frame))
        except AuthFailed as e:
            raise CloseConnection(f"{peer}: SASL authentication failed: {e}") from None
        if self._server is None:
            self._raw = False
        return [struct.pack(">i", len(challenge)) + challenge]
