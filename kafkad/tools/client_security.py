"""TLS and SASL for the tools' blocking client, from a Kafka client properties file (--command-config).

Understood keys (Kafka's and librdkafka's spellings): security.protocol, ssl.truststore.location /
ssl.ca.location (PEM), ssl.keystore.location (PEM key + chain) / ssl.certificate.location +
ssl.key.location, ssl.key.password, ssl.endpoint.identification.algorithm, sasl.mechanism,
sasl.jaas.config (username/password of Plain/ScramLoginModule) or sasl.username + sasl.password.
The SASL exchange itself is kafkad.client.SaslClient's, driven by kafkad.tools.client.BrokerConnection.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from kafkad.tools.client import ToolError

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = ""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        from kafkad.security.settings import SecurityConfigError, parse_jaas

        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in _PROTOCOLS:
            raise ToolError(f"security.protocol {protocol!r} is not one of {', '.join(_PROTOCOLS)}")
        ctx = None
        if protocol in ("SSL", "SASL_SSL"):
            ctx = ssl.create_default_context(
                cafile=props.get("ssl.truststore.location") or props.get("ssl.ca.location") or None
            )
            if props.get("ssl.endpoint.identification.algorithm", "https") == "":
                ctx.check_hostname = False
            cert = props.get("ssl.keystore.location") or props.get("ssl.certificate.location")
            if cert:
                ctx.load_cert_chain(cert, props.get("ssl.key.location"), props.get("ssl.key.password"))
        user, password = props.get("sasl.username", ""), props.get("sasl.password", "")
        if "sasl.jaas.config" in props:
            try:
                opts = parse_jaas(props["sasl.jaas.config"], "sasl.jaas.config").options
            except SecurityConfigError as e:
                raise ToolError(str(e)) from None
            user, password = opts.get("username", user), opts.get("password", password)
        mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "PLAIN")).upper()
        return cls(protocol, ctx, mechanism, user, password)

    @property
    def sasl(self) -> bool:
        """Whether connections authenticate (SASL_PLAINTEXT, SASL_SSL) after ApiVersions."""
        return self.protocol.startswith("SASL_")

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        if self.ssl_context is None:
            return sock
        try:
            return self.ssl_context.wrap_socket(sock, server_hostname=host)
        except (ssl.SSLError, OSError) as e:
            sock.close()
            raise ToolError(f"TLS handshake with {host} failed: {e}") from None
