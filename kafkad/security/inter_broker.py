"""The client side of broker-to-broker traffic on a TLS/SASL listener (inter.broker.listener.name).

`configure(settings)` (main, cluster mode) makes every BrokerChannel (controller requests, follower
fetches, controlled shutdown) dial with TLS when the listener has it, and authenticate with SaslHandshake v1 +
SaslAuthenticate (PLAIN or SCRAM) before its first request. Unset (the default), channels are plain TCP.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkad.security.scram import MECHANISMS, ScramClient, ScramError
from kafkad.security.settings import InterBroker

Request = Callable[[int, int, Mapping[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class InterBrokerClient:
    ssl_context: ssl.SSLContext | None
    mechanism: str
    username: str
    password: str

    async def authenticate(self, request: Request) -> None:
        """Raises ConnectionError when the peer refuses (the channel drops and retries with backoff)."""
        if not self.mechanism:
            return
        r = await request(17, 1, {"mechanism": self.mechanism})
        if r["error_code"]:
            raise ConnectionError(f"SASL mechanism {self.mechanism} refused (offered {r.get('mechanisms')})")

        async def step(token: bytes) -> bytes:
            resp = await request(36, 1, {"auth_bytes": token})
            if resp["error_code"]:
                raise ConnectionError(f"SASL authentication failed: {resp.get('error_message')}")
            return bytes(resp["auth_bytes"])

        if self.mechanism == "PLAIN":
            await step(b"\0" + self.username.encode() + b"\0" + self.password.encode())
            return
        assert self.mechanism in MECHANISMS
        client = ScramClient(self.mechanism, self.username, self.password)
        try:
            client.verify(await step(client.final(await step(client.first()))))
        except ScramError as e:
            raise ConnectionError(f"SASL authentication failed: {e}") from None


CLIENT: InterBrokerClient | None = None


def configure(ib: InterBroker | None) -> None:
    global CLIENT
    if ib is None or not (ib.protocol.tls or ib.protocol.sasl):
        CLIENT = None
        return
    ctx = None
    if ib.tls is not None:
        t = ib.tls
        ctx = ssl.create_default_context(
            cafile=t.truststore_location,
            cadata=t.truststore_certificates.replace("\\n", "\n") if t.truststore_certificates else None,
        )
        ctx.check_hostname = ib.verify_host
        if t.keystore_location is not None:  # our certificate, for listeners with ssl.client.auth
            ctx.load_cert_chain(t.keystore_location, password=t.key_password)
    CLIENT = InterBrokerClient(ctx, ib.mechanism, ib.username, ib.password)
