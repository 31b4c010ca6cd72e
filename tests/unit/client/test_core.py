"""kafkad.client's sans-IO pieces on their own: no socket, the peer is kafkad.protocol's codec and the real
SCRAM server (kafkad.security.scram.ScramServer)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kafkad.client import (
    AuthenticationFailed,
    Call,
    FrameReader,
    InFlight,
    MechanismRefused,
    MechanismUnsupported,
    SaslClient,
    UnexpectedResponse,
    VersionNegotiation,
    choose_versions,
    request_frame,
    stamp_correlation,
)
from kafkad.protocol import (
    SCHEMAS,
    ApiKey,
    ErrorCode,
    ProtocolDecodeError,
    RequestHeader,
    decode_request,
    encode_response_bytes,
)
from kafkad.security.scram import ScramError, ScramServer, make_credential


def _read_all(stream: bytes, chunk: int) -> list[bytes]:
    reader = FrameReader()
    out: list[bytes] = []
    pos = 0
    while pos < len(stream):
        buf = reader.get_buffer()
        n = min(len(buf), chunk, len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        pos += n
        frame = reader.buffer_updated(n)
        if frame is not None:
            out.append(bytes(frame))
    return out


def test_frame_reader_cuts_frames_at_any_chunking() -> None:
    frames = [struct.pack(">i", i) + bytes(range(i)) for i in (0, 1, 5, 255)]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    for chunk in (1, 2, 3, 4, 7, 64, len(stream)):
        assert _read_all(stream, chunk) == frames


@pytest.mark.parametrize("size", [-1, 3, (1 << 30) + 1])
def test_frame_reader_refuses_sizes_out_of_range(size: int) -> None:
    with pytest.raises(ProtocolDecodeError, match="out of range"):
        _read_all(struct.pack(">i", size) + b"\0" * 8, 64)


def test_request_frame_and_stamp() -> None:
    frame = bytearray(request_frame(ApiKey.METADATA, 9, 0, "me", {"topics": None}))
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    stamp_correlation(frame, 1234)
    req = decode_request(frame[4:])
    assert (req.header.api_key, req.header.api_version, req.header.correlation_id) == (3, 9, 1234)
    assert req.header.client_id == "me"


def test_in_flight_matches_by_id_and_wraps() -> None:
    inflight: InFlight[str] = InFlight()
    a, b, c = inflight.next_id(), inflight.next_id(), inflight.next_id()
    assert (a, b, c) == (1, 2, 3)
    inflight.expect(a, "a")
    inflight.expect(c, "c")  # b: a Produce with acks=0, no answer awaited
    assert inflight.match(struct.pack(">i", c) + b"rest") == "c"
    with pytest.raises(UnexpectedResponse) as ei:
        inflight.match(struct.pack(">i", b))
    assert ei.value.correlation_id == b
    assert inflight.drain() == ["a"]
    assert len(inflight) == 0
    inflight.last_id = 0x7FFFFFFF
    assert inflight.next_id() == 0  # int32 never goes negative


def _api_versions_answer(call: Call, cid: int, body: dict[str, Any], layout: int | None = None) -> bytes:
    version = call.api_version if layout is None else layout
    return encode_response_bytes(RequestHeader(call.api_key, version, cid, "c"), body)[4:]


def test_version_negotiation_picks_the_highest_common_version() -> None:
    ours: dict[int, tuple[int, int]] = {ApiKey.FETCH: (4, 11)}
    neg = VersionNegotiation(3, {"client_software_name": "t", "client_software_version": "1"}, ours)
    call = neg.request()
    assert call == Call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    keys = [
        {"api_key": ApiKey.FETCH, "min_version": 0, "max_version": 16},
        {"api_key": ApiKey.METADATA, "min_version": 0, "max_version": 5},
        {"api_key": 9999, "min_version": 0, "max_version": 1},
    ]
    assert neg.receive(_api_versions_answer(call, 1, {"error_code": 0, "api_keys": keys})) is None
    assert neg.error_code == ErrorCode.NONE
    assert neg.broker_versions[ApiKey.METADATA] == (0, 5)
    assert neg.versions == {ApiKey.FETCH: 11, ApiKey.METADATA: 5}


def test_version_negotiation_kip_511_fallback_and_errors() -> None:
    neg = VersionNegotiation(3, {}, {})
    first = neg.request()
    v0 = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 1}]}
    retry = neg.receive(_api_versions_answer(first, 1, v0, layout=0))
    assert retry is not None and retry.api_version == 1
    # A second UNSUPPORTED_VERSION is the answer, not another retry.
    assert neg.receive(_api_versions_answer(retry, 2, v0, layout=0)) is None
    assert neg.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert neg.versions == {}


def test_choose_versions_without_overlap() -> None:
    fetch = SCHEMAS[ApiKey.FETCH]
    assert choose_versions({ApiKey.FETCH: (0, 99)}, {}) == {ApiKey.FETCH: fetch.max_version}
    assert choose_versions({ApiKey.FETCH: (9, 12)}, {ApiKey.FETCH: (4, 8)}) == {}


class SaslBroker:
    """The broker's side of the two SASL APIs, with the real SCRAM server."""

    def __init__(self, password: str, enabled: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")):
        self.password = password
        self.enabled = enabled
        self.mechanism = ""
        self.server: ScramServer | None = None
        self.tamper = False

    def answer(self, call: Call) -> dict[str, Any]:
        if call.api_key == ApiKey.SASL_HANDSHAKE:
            self.mechanism = call.body["mechanism"]
            ok = self.mechanism in self.enabled
            return {"error_code": 0 if ok else 33, "mechanisms": list(self.enabled)}
        token = bytes(call.body["auth_bytes"])
        if self.mechanism == "PLAIN":
            ok = token == b"\0alice\0" + self.password.encode()
            return {"error_code": 0 if ok else 58, "error_message": None if ok else "bad", "auth_bytes": b""}
        if self.server is None:
            cred = make_credential(self.mechanism, "right", 4096)
            self.server = ScramServer(self.mechanism, lambda user: cred if user == "alice" else None)
        try:
            out = self.server.step(token)
        except ScramError as e:
            return {"error_code": 58, "error_message": str(e), "auth_bytes": b""}
        if self.tamper and out.startswith(b"v="):
            out = b"v=" + b"A" * 44
        return {"error_code": 0, "auth_bytes": out}


def _run(client: SaslClient, broker: SaslBroker) -> list[int]:
    apis = []
    call: Call | None = client.start()
    while call is not None:
        apis.append(call.api_key)
        call = client.receive(broker.answer(call))
    return apis


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_exchange_succeeds(mechanism: str) -> None:
    client = SaslClient(mechanism, "alice", "right")
    apis = _run(client, SaslBroker("right"))
    steps = 1 if mechanism == "PLAIN" else 2
    assert apis == [ApiKey.SASL_HANDSHAKE] + [ApiKey.SASL_AUTHENTICATE] * steps
    assert client.complete
    with pytest.raises(AuthenticationFailed, match="after the exchange completed"):
        client.receive({"error_code": 0, "auth_bytes": b""})


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_wrong_password_fails(mechanism: str) -> None:
    client = SaslClient(mechanism, "alice", "wrong")
    with pytest.raises(AuthenticationFailed, match="SASL authentication failed"):
        _run(client, SaslBroker("right"))
    assert not client.complete


def test_sasl_refused_unsupported_and_forged_server() -> None:
    with pytest.raises(MechanismRefused) as ei:
        _run(SaslClient("SCRAM-SHA-512", "alice", "right"), SaslBroker("right", ("PLAIN",)))
    assert ei.value.offered == ["PLAIN"]
    # The broker accepted a mechanism we cannot speak: refused after the handshake, as before the core.
    with pytest.raises(MechanismUnsupported):
        _run(SaslClient("GSSAPI", "alice", "right"), SaslBroker("right", ("GSSAPI",)))
    forged = SaslBroker("right")
    forged.tamper = True
    with pytest.raises(AuthenticationFailed, match="server signature"):
        _run(SaslClient("SCRAM-SHA-256", "alice", "right"), forged)
