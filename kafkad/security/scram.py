"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka speaks it: credentials, the server and a client.

A credential is what Kafka stores (ZooKeeper /config/users/<user>, here a local file of the same shape):
`salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`. The password itself is never stored.
The expensive part (PBKDF2) runs when a credential is made; an authentication costs a few HMACs.
An unknown user gets a made-up salt and fails at the final message, like Kafka, so a client cannot probe
which users exist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # AlterUserScramCredentials' int8
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds for both mechanisms


class ScramError(Exception):
    """Authentication failed (message for the client: never says whether the user exists)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        b = base64.b64encode
        return (
            f"salt={b(self.salt).decode()},stored_key={b(self.stored_key).decode()},"
            f"server_key={b(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        parts = dict(p.split("=", 1) for p in text.split(","))
        d = base64.b64decode
        return cls(d(parts["salt"]), d(parts["stored_key"]), d(parts["server_key"]), int(parts["iterations"]))


def _h(mechanism: str) -> str:
    return MECHANISMS[mechanism]


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_h(mechanism), password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    h = _h(mechanism)
    client_key = hmac.digest(salted, b"Client Key", h)
    return ScramCredential(
        salt, hashlib.new(h, client_key).digest(), hmac.digest(salted, b"Server Key", h), iterations
    )


def make_credential(
    mechanism: str, password: str, iterations: int = 4096, salt: bytes | None = None
) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
    )


def _attrs(msg: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in msg.split(","):
        if len(part) >= 2 and part[1] == "=":
            out[part[0]] = part[2:]
    return out


def _saslname(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One server-side exchange: `step(client_first)` -> server_first, `step(client_final)` -> server_final."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._state = 0
        self.username: str | None = None
        self._cred: ScramCredential | None = None
        self._known = False
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    @property
    def complete(self) -> bool:
        return self._state == 2

    def step(self, data: bytes) -> bytes:
        try:
            msg = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        if self._state == 0:
            return self._first(msg)
        if self._state == 1:
            return self._final(msg)
        raise ScramError("Unexpected SCRAM message after the exchange completed")

    def _first(self, msg: str) -> bytes:
        # gs2-header: "n,," or "n,a=<authzid>," (channel binding is not supported: "y"/"p" are refused)
        parts = msg.split(",", 2)
        if len(parts) != 3 or parts[0] != "n":
            raise ScramError("Invalid SCRAM client first message (channel binding is not supported)")
        authzid = parts[1][2:] if parts[1].startswith("a=") else ""
        bare = parts[2]
        attrs = _attrs(bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("Invalid SCRAM client first message")
        # Kafka: extensions (e.g. tokenauth for delegation tokens) follow as further attributes.
        if "tokenauth" in bare:
            raise ScramError("Delegation token authentication is not supported")
        user = _saslname(attrs["n"])
        if authzid and _saslname(authzid) != user:
            raise ScramError("Authorization id does not match the user name")
        self.username = user
        cred = self._lookup(user)
        self._known = cred is not None
        if cred is None:  # a plausible made-up credential: fail later, the same way
            cred = ScramCredential(hashlib.sha256(user.encode()).digest(), b"", b"", MIN_ITERATIONS)
        self._cred = cred
        self._nonce = attrs["r"] + secrets.token_urlsafe(24)
        self._client_first_bare = bare
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._state = 1
        return self._server_first.encode()

    def _final(self, msg: str) -> bytes:
        attrs = _attrs(msg)
        proof_at = msg.rfind(",p=")
        # librdkafka before 2.6.1 (kcat 1.7 ships 2.0.2) sends its client nonce twice, then ours: Kafka
        # 3.8.1-3.9 accepted a nonce that ends with the server's (still fresh, still ours); so do we.
        if proof_at < 0 or not attrs.get("r", "").endswith(self._nonce) or "c" not in attrs:
            raise ScramError("Invalid SCRAM client final message")
        without_proof = msg[:proof_at]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        cred = self._cred
        assert cred is not None
        h = _h(self.mechanism)
        try:
            proof = base64.b64decode(attrs["p"], validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client proof") from None
        client_signature = hmac.digest(cred.stored_key, auth_message, h) if self._known else b""
        if not self._known or len(proof) != len(client_signature):
            raise ScramError("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(h, client_key).digest(), cred.stored_key):
            raise ScramError("Authentication failed: Invalid user credentials")
        self._state = 2
        return b"v=" + base64.b64encode(hmac.digest(cred.server_key, auth_message, h))


class ScramClient:
    """The client side (kafkad's tools, tests, and brokers authenticating to each other)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._password = password
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._nonce = secrets.token_urlsafe(24)
        self._bare = f"n={name},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attrs(text)
        if not attrs.get("r", "").startswith(self._nonce):
            raise ScramError("server nonce does not extend ours")
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        h = _h(self.mechanism)
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", h)
        signature = hmac.digest(hashlib.new(h, client_key).digest(), auth_message, h)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", h), auth_message, h)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attrs(server_final.decode())
        if "e" in attrs:
            raise ScramError(f"server error: {attrs['e']}")
        if base64.b64decode(attrs.get("v", "")) != self._server_signature:
            raise ScramError("server signature does not match")
