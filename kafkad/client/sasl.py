"""The client side of SASL authentication (SaslHandshake v1, then SaslAuthenticate v1), sans-IO.

`SaslClient.start()` is the SaslHandshake request naming the mechanism; each response body goes to
`receive`, which returns the next SaslAuthenticate request or None once authenticated:
- PLAIN (RFC 4616): one token, `\\0username\\0password`.
- SCRAM-SHA-256/512 (RFC 5802, 7677): client-first, client-final with the proof, then the server's
  signature is checked (kafkad.security.scram.ScramClient does the arithmetic).
A refusal raises a SaslError subclass; the shell turns it into its own failure (the tools' one-line error,
the broker channel's ConnectionError and reconnect backoff).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kafkad.client.framing import Call
from kafkad.protocol import ApiKey

if TYPE_CHECKING:
    from kafkad.security.scram import ScramClient

HANDSHAKE_VERSION = 1  # v1: the tokens travel in SaslAuthenticate requests (v0: raw frames)
AUTHENTICATE_VERSION = 1


class SaslError(Exception):
    """Authentication did not succeed; str() says why."""


class MechanismRefused(SaslError):
    """The broker does not enable the mechanism (SaslHandshake error); `offered` is its list."""

    def __init__(self, mechanism: str, offered: Any) -> None:
        super().__init__(f"SASL mechanism {mechanism} refused (offered {offered})")
        self.mechanism = mechanism
        self.offered = offered


class MechanismUnsupported(SaslError):
    """The broker accepted a mechanism this client cannot speak."""

    def __init__(self, mechanism: str) -> None:
        super().__init__(f"SASL mechanism {mechanism} is not supported")
        self.mechanism = mechanism


class AuthenticationFailed(SaslError):
    """The broker refused the credentials (its error message), or the SCRAM exchange failed."""

    def __init__(self, detail: object) -> None:
        super().__init__(f"SASL authentication failed: {detail}")


class _State(enum.Enum):
    HANDSHAKE = enum.auto()
    PLAIN = enum.auto()  # the PLAIN token sent
    SCRAM_FIRST = enum.auto()  # client-first sent
    SCRAM_FINAL = enum.auto()  # client-final sent
    DONE = enum.auto()


class SaslClient:
    """One authentication of one connection."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._scram: ScramClient | None = None
        self._state = _State.HANDSHAKE

    @property
    def complete(self) -> bool:
        return self._state is _State.DONE

    def start(self) -> Call:
        return Call(ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": self.mechanism})

    def receive(self, body: Mapping[str, Any]) -> Call | None:
        """The response body to the last request: the next request, or None when authenticated."""
        state = self._state
        if state is _State.HANDSHAKE:
            if body["error_code"]:
                raise MechanismRefused(self.mechanism, body.get("mechanisms"))
            if self.mechanism == "PLAIN":
                self._state = _State.PLAIN
                return self._token(b"\0" + self._username.encode() + b"\0" + self._password.encode())
            # Imported here: a broker without SASL listeners never loads SCRAM (test_startup_imports).
            from kafkad.security.scram import MECHANISMS, ScramClient

            if self.mechanism not in MECHANISMS:
                raise MechanismUnsupported(self.mechanism)
            self._scram = ScramClient(self.mechanism, self._username, self._password)
            self._state = _State.SCRAM_FIRST
            return self._token(self._scram.first())
        if body["error_code"]:
            raise AuthenticationFailed(body.get("error_message"))
        token = bytes(body["auth_bytes"])
        scram = self._scram
        if state is _State.PLAIN or scram is None:
            if state is not _State.PLAIN:
                raise AuthenticationFailed("an answer after the exchange completed")
            self._state = _State.DONE
            return None
        from kafkad.security.scram import ScramError

        try:
            if state is _State.SCRAM_FIRST:
                self._state = _State.SCRAM_FINAL
                return self._token(scram.final(token))
            if state is not _State.SCRAM_FINAL:
                raise AuthenticationFailed("an answer after the exchange completed")
            scram.verify(token)
        except ScramError as e:
            raise AuthenticationFailed(e) from None
        self._state = _State.DONE
        return None

    def _token(self, token: bytes) -> Call:
        return Call(ApiKey.SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token})
