"""kafkad's Kafka client core: the wire protocol's client side without any I/O (issue 19 item 3).

As h11 is one HTTP/1.1 protocol core with many I/O shells, this package holds what every kafkad client
does the same way, as plain objects that take bytes or decoded bodies and say what to send next:

- `framing`: request frames (size prefix, header, correlation id written in place), and `FrameReader`,
  which cuts size-prefixed response frames out of a byte stream straight into each frame's own bytearray
  (a socket `recv_into` or an asyncio BufferedProtocol fills it: no copy between the kernel and the frame),
  and `ScratchFrameReader`, for shells whose loop reads until a short read (uvloop): one recv per response.
- `correlation`: `InFlight`, the correlation ids (1, 2, ... as int32) and the requests awaiting an answer;
  a response whose id is not awaited is the peer's error.
- `versions`: `VersionNegotiation`, the ApiVersions exchange (with the KIP-511 fallback when the broker
  answers a too-new ApiVersions in v0 layout) and `choose_versions`, the highest common version per API.
- `sasl`: `SaslClient`, the SaslHandshake v1 + SaslAuthenticate v1 exchange for PLAIN and
  SCRAM-SHA-256/512 (the SCRAM arithmetic is kafkad.security.scram's).

The shells move the bytes: the tools' blocking `kafkad.tools.client.BrokerConnection` (one request at a time
over a socket) and the broker's asyncio `kafkad.replication.broker_channel.BrokerChannel` (pipelined,
reconnecting; follower fetches and the controller's requests). Imports: kafkad.protocol and
kafkad.security.scram only.
"""

from kafkad.client.correlation import InFlight, UnexpectedResponse
from kafkad.client.framing import (
    MAX_RESPONSE_BYTES,
    Call,
    FrameReader,
    ScratchFrameReader,
    request_frame,
    stamp_correlation,
)
from kafkad.client.sasl import (
    AuthenticationFailed,
    MechanismRefused,
    MechanismUnsupported,
    SaslClient,
    SaslError,
)
from kafkad.client.versions import VersionNegotiation, choose_versions

__all__ = [
    "MAX_RESPONSE_BYTES",
    "AuthenticationFailed",
    "Call",
    "FrameReader",
    "InFlight",
    "MechanismRefused",
    "MechanismUnsupported",
    "SaslClient",
    "SaslError",
    "ScratchFrameReader",
    "UnexpectedResponse",
    "VersionNegotiation",
    "choose_versions",
    "request_frame",
    "stamp_correlation",
]
