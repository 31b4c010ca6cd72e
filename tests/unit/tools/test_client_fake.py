"""A scripted in-process broker (FakeBroker) for the tools' unit tests, and KafkaClient's tests.

FakeBroker listens on 127.0.0.1, decodes each request with kafkad.protocol and answers with the body its
handler for that api key returns; it records every request it saw. ApiVersions is answered from
`api_ranges` (default: every api in SCHEMAS at its full range).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kafkad.protocol import (
    SCHEMAS,
    ApiKey,
    ErrorCode,
    Request,
    decode_request,
    encode_response_bytes,
)
from kafkad.tools.client import (
    TOOL_VERSIONS,
    KafkaApiError,
    KafkaClient,
    ToolError,
    check,
    choose_versions,
    parse_bootstrap,
)

Handler = Callable[[Request], Mapping[str, Any] | None]


class FakeBroker:
    def __init__(
        self,
        handlers: Mapping[int, Handler] | None = None,
        api_ranges: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self.handlers: dict[int, Handler] = dict(handlers or {})
        self.api_ranges = dict(api_ranges or {k: (a.min_version, a.max_version) for k, a in SCHEMAS.items()})
        self.requests: list[Request] = []
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port = self._srv.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._srv.close()

    def __enter__(self) -> FakeBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metadata_body(self, topics: Mapping[str, int]) -> dict[str, Any]:
        return {
            "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port, "rack": None}],
            "cluster_id": "fake",
            "controller_id": 0,
            "topics": [
                {
                    "error_code": 0,
                    "name": name,
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition_index": p,
                            "leader_id": 0,
                            "leader_epoch": 0,
                            "replica_nodes": [0],
                            "isr_nodes": [0],
                            "offline_replicas": [],
                        }
                        for p in range(n)
                    ],
                }
                for name, n in topics.items()
            ],
        }

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        with conn:
            f = conn.makefile("rb")
            while True:
                head = f.read(4)
                if len(head) < 4:
                    return
                frame = bytearray(f.read(struct.unpack(">i", head)[0]))
                req = decode_request(frame)
                self.requests.append(req)
                h = req.header
                if h.api_key == ApiKey.API_VERSIONS:
                    body: Mapping[str, Any] | None = {
                        "error_code": 0,
                        "api_keys": [
                            {"api_key": k, "min_version": lo, "max_version": hi}
                            for k, (lo, hi) in self.api_ranges.items()
                        ],
                    }
                else:
                    body = self.handlers[h.api_key](req)
                if body is not None:
                    conn.sendall(encode_response_bytes(h, body))


@pytest.fixture
def fake() -> Any:
    with FakeBroker() as b:
        yield b


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap("[::1]:9093") == [("::1", 9093)]
    assert parse_bootstrap("host") == [("host", 9092)]
    with pytest.raises(ToolError):
        parse_bootstrap("host:notaport")
    with pytest.raises(ToolError):
        parse_bootstrap("")


def test_choose_versions_intersects_ranges() -> None:
    chosen = choose_versions(
        {ApiKey.FETCH: (0, 99), ApiKey.PRODUCE: (3, 5), 9999: (0, 1), ApiKey.LIST_OFFSETS: (9, 12)}
    )
    assert chosen[ApiKey.FETCH] == TOOL_VERSIONS[ApiKey.FETCH][1]
    assert chosen[ApiKey.PRODUCE] == 5
    assert 9999 not in chosen
    assert ApiKey.LIST_OFFSETS not in chosen  # no overlap: 9-12 vs ours


def test_check_maps_codes_to_messages() -> None:
    check(0)
    with pytest.raises(KafkaApiError) as ei:
        check(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't'")
    assert ei.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
    assert ei.value.message == "Topic 't': TopicExistsException: Topic already exists."
    with pytest.raises(KafkaApiError) as ei:
        check(12345)
    assert ei.value.code is ErrorCode.UNKNOWN_SERVER_ERROR


def test_negotiates_and_sends_metadata(fake: FakeBroker) -> None:
    fake.api_ranges[ApiKey.METADATA] = (0, 5)
    fake.handlers[ApiKey.METADATA] = lambda req: fake.metadata_body({"t": 2})
    with KafkaClient(fake.bootstrap) as c:
        assert c.conn.versions[ApiKey.METADATA] == 5
        md = c.metadata(["t"])
        assert [p.partition for p in md.topic("t").partitions] == [0, 1]
        assert c.leader("t", 1) == 0
        assert c.node(0) is c.conn
        with pytest.raises(KafkaApiError) as ei:
            md.topic("nope")
        assert ei.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    md_reqs = [r for r in fake.requests if r.header.api_key == ApiKey.METADATA]
    assert md_reqs[0].header.api_version == 5
    assert [t["name"] for t in md_reqs[0].body["topics"]] == ["t"]
    assert md_reqs[0].body["allow_auto_topic_creation"] is False


def test_unsupported_api_is_a_clear_error(fake: FakeBroker) -> None:
    del fake.api_ranges[ApiKey.ALTER_CONFIGS]
    with KafkaClient(fake.bootstrap) as c:
        assert not c.supports(ApiKey.ALTER_CONFIGS)
        with pytest.raises(ToolError, match="does not support AlterConfigs"):
            c.send(ApiKey.ALTER_CONFIGS, {"resources": []})


def test_connection_refused_is_a_tool_error() -> None:
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ToolError, match="could not be established"):
        KafkaClient(f"127.0.0.1:{port}")
