"""The client side of broker-to-broker traffic on a TLS/SASL listener (inter.broker.listener.name).

`configure(settings)` (main, cluster mode) makes every BrokerChannel (controller requests, follower
fetches, controlled shutdown) dial with TLS when the listener has it, and authenticate with SaslHandshake v1 +
SaslAuthenticate (PLAIN or SCRAM, kafkad.client.SaslClient's exchange) with these credentials before its first
request. Unset (the default), channels are plain TCP.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from kafkad.security.settings import InterBroker


@dataclass(frozen=True, slots=True)
class InterBrokerClient:
    """How a BrokerChannel dials: TLS context (None: plain TCP) and SASL login (mechanism "": none)."""

    ssl_context: ssl.SSLContext | None
    mechanism: str
    username: str
    password: str


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
