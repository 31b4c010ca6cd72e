"""The request frames both client shells send, byte for byte, against frames recorded from the code before
the client core existed (issue 19: "nothing changes outside").

A scripted threaded server on 127.0.0.1 records every request frame (size prefix included) per connection
and answers it: ApiVersions (every schema at its full range, or a broker that only speaks ApiVersions v0-2
and answers v3 with UNSUPPORTED_VERSION in v0 layout, KIP-511), SaslHandshake, SaslAuthenticate (PLAIN, and
SCRAM through the real ScramServer), Metadata, Produce (acks=0 gets no answer), Fetch. The scripts then run
through the blocking shell (the tools' KafkaClient / BrokerConnection with ClientSecurity) and the asyncio
shell (BrokerChannel, with inter-broker TLS-less SASL), each scenario on a fresh server. SCRAM nonces are
fixed (secrets.token_urlsafe), so the client's proofs are deterministic too.

`python -m tests.unit.client.test_golden_frames` rewrites data/client_frames.json from the code under test
(done once, before the core existed: commit "client: golden request frames of both wire clients").
"""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from kafkad.protocol import SCHEMAS, ApiKey, RequestHeader, decode_request, encode_response_bytes
from kafkad.replication.broker_channel import BrokerChannel
from kafkad.replication.fetch_request import FetchEncoder, fetch_body
from kafkad.security import inter_broker, scram
from kafkad.storage.records import SimpleRecord, build_batch
from kafkad.tools.client import BrokerConnection, KafkaClient
from kafkad.tools.client_security import ClientSecurity

DATA = Path(__file__).parent / "data" / "client_frames.json"
PASSWORD = "s3cret"
RECORDS = bytes(build_batch([SimpleRecord(b"k", b"v", timestamp=1_700_000_000_000)]))
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class RecordingBroker:
    """Records request frames per connection, answers from a script. Threads: serves sync and async clients."""

    def __init__(self, api_versions_max: int | None = None) -> None:
        self.api_versions_max = api_versions_max
        self.frames: list[tuple[int, str]] = []  # (connection number, frame hex)
        self._lock = threading.Lock()
        self._count = 0
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port = self._srv.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        self._srv.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            with self._lock:
                n, self._count = self._count, self._count + 1
            threading.Thread(target=self._conn, args=(conn, n), daemon=True).start()

    def _conn(self, conn: socket.socket, n: int) -> None:
        state: dict[str, Any] = {}
        with conn:
            f = conn.makefile("rb")
            while True:
                head = f.read(4)
                if len(head) < 4:
                    return
                frame = f.read(struct.unpack(">i", head)[0])
                with self._lock:
                    self.frames.append((n, (head + frame).hex()))
                answer = self._answer(decode_request(bytearray(frame)), state)
                if answer is not None:
                    conn.sendall(answer)

    def _answer(self, req: Any, state: dict[str, Any]) -> bytes | None:
        h, body = req.header, req.body
        key = h.api_key
        if key == ApiKey.API_VERSIONS:
            top = self.api_versions_max
            if top is not None and h.api_version > top:
                v0 = RequestHeader(key, 0, h.correlation_id, h.client_id)
                return encode_response_bytes(
                    v0,
                    {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": top}]},
                )
            ranges = [
                {"api_key": k, "min_version": a.min_version, "max_version": a.max_version}
                for k, a in sorted(SCHEMAS.items())
            ]
            return encode_response_bytes(h, {"error_code": 0, "api_keys": ranges})
        if key == ApiKey.SASL_HANDSHAKE:
            state["mechanism"] = body["mechanism"]
            return encode_response_bytes(h, {"error_code": 0, "mechanisms": MECHANISMS})
        if key == ApiKey.SASL_AUTHENTICATE:
            mech = state["mechanism"]
            if mech == "PLAIN":
                token = b""
            else:
                server = state.setdefault(
                    "scram",
                    scram.ScramServer(
                        mech, lambda _u: scram.make_credential(mech, PASSWORD, 4096, b"salt" * 4)
                    ),
                )
                token = server.step(bytes(body["auth_bytes"]))
            return encode_response_bytes(h, {"error_code": 0, "auth_bytes": token})
        if key == ApiKey.METADATA:
            return encode_response_bytes(
                h,
                {
                    "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port, "rack": None}],
                    "cluster_id": "golden",
                    "controller_id": 0,
                    "topics": [
                        {
                            "name": "t",
                            "partitions": [
                                {"partition_index": 0, "leader_id": 0, "replica_nodes": [0], "isr_nodes": [0]}
                            ],
                        }
                    ],
                },
            )
        if key == ApiKey.PRODUCE:
            if body["acks"] == 0:
                return None
            return encode_response_bytes(
                h, {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 7}]}]}
            )
        if key == ApiKey.FETCH:
            return encode_response_bytes(
                h,
                {
                    "responses": [
                        {
                            "topic": "t",
                            "partitions": [{"partition_index": 0, "high_watermark": 1, "records": RECORDS}],
                        }
                    ]
                },
            )
        raise AssertionError(f"unscripted api {key}")


def _produce(acks: int) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 1500,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": RECORDS}]}],
    }


class _FetchSettings:
    broker_id = 2
    max_wait_ms = 500
    min_bytes = 1
    response_max_bytes = 10 << 20
    partition_max_bytes = 1 << 20
    rack = ""


FETCH_PARTITIONS = [("t", 0, 3, 42, 0), ("u", 1, -1, 7, 5)]


def _sasl(mechanism: str) -> ClientSecurity:
    return ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": "alice",
            "sasl.password": PASSWORD,
        }
    )


def _blocking_script(port: int, security: ClientSecurity | None) -> None:
    with KafkaClient(f"127.0.0.1:{port}", security=security) as c:
        c.metadata(["t"])
        c.metadata()
        c.send(ApiKey.PRODUCE, _produce(-1))
        c.send(ApiKey.PRODUCE, _produce(0), expect_response=False)
        c.send(ApiKey.FETCH, fetch_body(_FetchSettings, FETCH_PARTITIONS))
        c.conn.send(ApiKey.METADATA, {"topics": [{"name": "t"}]}, version=1)


def _kip511_script(port: int, security: ClientSecurity | None) -> None:
    conn = BrokerConnection("127.0.0.1", port, client_id="golden-tool", security=security)
    try:
        conn.send(ApiKey.METADATA, {"topics": None}, version=9)
    finally:
        conn.close()


async def _async_script(port: int) -> None:
    ch = BrokerChannel("127.0.0.1", port, client_id="broker-2")
    try:
        await ch.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "kafkad", "client_software_version": "1"}
        )
        await ch.request(ApiKey.METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
        await ch.request(ApiKey.PRODUCE, 8, _produce(-1))
        await ch.request(ApiKey.FETCH, 11, fetch_body(_FetchSettings, FETCH_PARTITIONS))
        enc = FetchEncoder(_FetchSettings, ch.client_id)
        await ch.request_raw(enc.frame(FETCH_PARTITIONS))
        sent = ch.send_raw(enc.frame(FETCH_PARTITIONS[::-1]))
        assert sent is not None
        await sent
        await asyncio.gather(  # pipelined: two in flight
            ch.request(ApiKey.METADATA, 4, {"topics": None, "allow_auto_topic_creation": True}),
            ch.request_raw(enc.frame(FETCH_PARTITIONS[:1])),
        )
    finally:
        ch.close()


def _async_sasl(port: int, mechanism: str | None) -> None:
    saved = inter_broker.CLIENT
    if mechanism is not None:
        inter_broker.CLIENT = inter_broker.InterBrokerClient(None, mechanism, "broker", PASSWORD)
    try:
        uvloop.run(_async_script(port))
    finally:
        inter_broker.CLIENT = saved


SCENARIOS: dict[str, tuple[Callable[[int], None], int | None]] = {
    "blocking plaintext": (lambda port: _blocking_script(port, None), None),
    **{
        f"blocking {m}": ((lambda port, m=m: _blocking_script(port, _sasl(m))), None)  # type: ignore[misc]
        for m in MECHANISMS
    },
    "blocking KIP-511 fallback": (lambda port: _kip511_script(port, None), 2),
    "blocking KIP-511 fallback SCRAM-SHA-256": (lambda port: _kip511_script(port, _sasl("SCRAM-SHA-256")), 2),
    "async plaintext": (lambda port: _async_sasl(port, None), None),
    **{f"async {m}": ((lambda port, m=m: _async_sasl(port, m)), None) for m in MECHANISMS},  # type: ignore[misc]
}


def _record(name: str, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    fn, api_versions_max = SCENARIOS[name]
    nonces = iter(range(1000))
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n=None: f"nonce{next(nonces)}")
    broker = RecordingBroker(api_versions_max)
    try:
        fn(broker.port)
    finally:
        broker.close()
    return [list(x) for x in broker.frames]


def record() -> None:
    """Rewrites data/client_frames.json from the code under test."""
    with pytest.MonkeyPatch.context() as mp:
        out = {name: _record(name, mp) for name in SCENARIOS}
    DATA.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_frames_byte_identical(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    golden = json.loads(DATA.read_text())[name]
    got = _record(name, monkeypatch)
    assert len(got) == len(golden)
    for (gc, gf), (c, f) in zip(golden, got, strict=True):
        assert (c, f) == (gc, gf), f"{name}: frame differs from the recorded one"
    assert got == golden


if __name__ == "__main__":
    record()
