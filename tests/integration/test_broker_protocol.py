"""Protocol-level tests against a real kafkad process: raw frames, golden client frames, bad input.

Bad input must close only the offending connection; the broker keeps serving everyone else.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode, RequestHeader, decode_request, decode_response, encode_request
from tests.integration.broker_process import BrokerProcess
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

# Record timestamps near now: older ones make the log roll a segment per append (segment.ms), as Kafka does.
NOW_MS = int(time.time() * 1000)
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "requests.jsonl"

# kafka-protocol.md "The advertised set", for the keys kafkad itself registers (groups add 8-16, 42).
ADVERTISED = {
    0: (0, 11),
    1: (0, 17),
    2: (0, 9),
    3: (0, 12),
    4: (0, 7),  # LeaderAndIsr, StopReplica, UpdateMetadata: answered INVALID_REQUEST standalone
    5: (0, 4),
    6: (0, 8),
    7: (0, 3),  # ControlledShutdown: answered by the controller (NOT_CONTROLLER standalone)
    18: (0, 4),
    19: (0, 7),
    20: (0, 6),
    21: (0, 2),
    22: (0, 5),
    23: (0, 4),
    32: (0, 4),
    33: (0, 2),
    37: (0, 3),
    43: (0, 2),
    44: (0, 1),
    45: (0, 0),
    46: (0, 0),
    60: (0, 1),
}
GROUP_ADVERTISED = {
    8: (0, 9),
    9: (0, 9),
    10: (0, 6),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 5),
    16: (0, 5),
    42: (0, 2),
    47: (0, 0),
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("kafkad-proto")) as b:
        yield b


@pytest.fixture()
def raw(broker: BrokerProcess) -> Iterator[Raw]:
    r = Raw(broker.port)
    yield r
    r.close()


def error_codes(body: Any) -> Iterator[int]:
    if isinstance(body, dict):
        for k, v in body.items():
            if k == "error_code":
                yield v
            else:
                yield from error_codes(v)
    elif isinstance(body, list):
        for item in body:
            yield from error_codes(item)


# SaslHandshake, SaslAuthenticate, the ACL and SCRAM credential APIs (every listener, as Kafka does).
SECURITY_ADVERTISED = {17: (0, 1), 36: (0, 2), 29: (0, 3), 30: (0, 3), 31: (0, 3), 50: (0, 0), 51: (0, 0)}
# Transactions: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit, DescribeProducers,
# DescribeTransactions, ListTransactions (Kafka 3.9's ranges).
TXN_ADVERTISED = {
    24: (0, 5),
    25: (0, 4),
    26: (0, 4),
    27: (0, 1),
    28: (0, 4),
    61: (0, 0),
    65: (0, 0),
    66: (0, 1),
}


def assert_alive(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    try:
        assert r.call(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    finally:
        r.close()
    assert broker.running


def test_api_versions_advertises_the_table(raw: Raw) -> None:
    for version in (0, 1, 2):
        body = raw.call(ApiKey.API_VERSIONS, version, {})
        assert body["error_code"] == 0
        got = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        for key, rng in ADVERTISED.items():
            assert got.get(key) == rng, key
        for key, rng in (SECURITY_ADVERTISED | TXN_ADVERTISED).items():
            assert got.get(key) == rng, key
        extra = (
            set(got)
            - set(ADVERTISED)
            - set(GROUP_ADVERTISED)
            - set(SECURITY_ADVERTISED)
            - set(TXN_ADVERTISED)
        )
        assert not extra, f"advertised keys outside the table: {extra}"
        for key in set(got) & set(GROUP_ADVERTISED):
            assert got[key] == GROUP_ADVERTISED[key]


def test_api_versions_v3_software_name(raw: Raw) -> None:
    ok = raw.call(18, 3, {"client_software_name": "kafkad-test", "client_software_version": "1.0"})
    assert ok["error_code"] == 0
    bad = raw.call(18, 3, {"client_software_name": "bad name!", "client_software_version": "1.0"})
    assert bad["error_code"] == ErrorCode.INVALID_REQUEST


def test_api_versions_above_max_gets_kip511_fallback(raw: Raw) -> None:
    raw.send_frame(struct.pack(">hhih", 18, 9, 77, 1) + b"x" + b"garbage-body")
    frame = raw.recv_frame()
    corr, body = decode_response(18, 0, frame)
    assert corr == 77
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


def test_metadata_create_produce_fetch_list_offsets(raw: Raw, broker: BrokerProcess) -> None:
    created = raw.call(
        19,
        4,
        {
            "topics": [{"name": "proto-a", "num_partitions": 2, "replication_factor": 1, "configs": []}],
            "timeout_ms": 5000,
            "validate_only": False,
        },
    )
    assert created["topics"][0]["error_code"] == 0
    again = raw.call(
        19,
        4,
        {"topics": [{"name": "proto-a", "num_partitions": 2, "replication_factor": 1}], "timeout_ms": 5000},
    )
    assert again["topics"][0]["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
    rf = raw.call(
        19,
        4,
        {"topics": [{"name": "proto-rf", "num_partitions": 1, "replication_factor": 3}], "timeout_ms": 5000},
    )
    assert rf["topics"][0]["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
    bad_cfg = raw.call(
        19,
        4,
        {
            "topics": [
                {
                    "name": "proto-c",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "configs": [{"name": "retention.ms", "value": "soon"}],
                }
            ],
            "timeout_ms": 5000,
        },
    )
    assert bad_cfg["topics"][0]["error_code"] == ErrorCode.INVALID_CONFIG
    assert "retention.ms" in (bad_cfg["topics"][0]["error_message"] or "")

    md = raw.call(
        3,
        8,
        {
            "topics": [{"name": "proto-a"}, {"name": "no-such"}, {"name": "bad name"}],
            "allow_auto_topic_creation": False,
        },
    )
    assert md["controller_id"] == md["brokers"][0]["node_id"]
    assert md["brokers"][0]["port"] == broker.port
    topics = {t["name"]: t for t in md["topics"]}
    assert [p["partition_index"] for p in topics["proto-a"]["partitions"]] == [0, 1]
    assert topics["proto-a"]["partitions"][0]["isr_nodes"] == [md["brokers"][0]["node_id"]]
    assert topics["no-such"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert topics["bad name"]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    auto = raw.call(3, 8, {"topics": [{"name": "proto-auto"}], "allow_auto_topic_creation": True})
    assert auto["topics"][0]["error_code"] == 0 and len(auto["topics"][0]["partitions"]) == 1

    from kafkad.storage.records import SimpleRecord, build_batch

    batch = build_batch(
        [
            SimpleRecord(None, b"hello", timestamp=NOW_MS),
            SimpleRecord(b"k", b"world", timestamp=NOW_MS + 1),
        ]
    )

    def produce(version: int, acks: int, payload: bytes) -> dict[str, Any]:
        return raw.call(
            0,
            version,
            {
                "acks": acks,
                "timeout_ms": 5000,
                "topic_data": [{"name": "proto-a", "partition_data": [{"index": 0, "records": payload}]}],
            },
        )

    first = produce(8, -1, batch)["responses"][0]["partition_responses"][0]
    assert (first["error_code"], first["base_offset"]) == (0, 0)
    second = produce(7, 1, batch)["responses"][0]["partition_responses"][0]
    assert (second["error_code"], second["base_offset"]) == (0, 2)
    assert (
        produce(8, 2, batch)["responses"][0]["partition_responses"][0]["error_code"]
        == ErrorCode.INVALID_REQUIRED_ACKS
    )
    assert (
        produce(2, 1, batch)["responses"][0]["partition_responses"][0]["error_code"]
        == ErrorCode.INVALID_RECORD  # a v2 batch below Produce v3 (Kafka's validateRecords)
    )
    corrupt = bytearray(batch)
    corrupt[-1] ^= 0xFF
    assert (
        produce(8, 1, bytes(corrupt))["responses"][0]["partition_responses"][0]["error_code"]
        == ErrorCode.CORRUPT_MESSAGE
    )

    fetch = raw.call(
        1,
        11,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "proto-a",
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
        },
    )
    assert fetch["session_id"] == 0
    part = fetch["responses"][0]["partitions"][0]
    assert part["error_code"] == 0 and part["high_watermark"] == 4
    assert bytes(part["records"]).count(b"hello") == 2
    oor = raw.call(
        1,
        11,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "topics": [
                {
                    "topic": "proto-a",
                    "partitions": [{"partition": 0, "fetch_offset": 99, "partition_max_bytes": 1 << 20}],
                }
            ],
        },
    )
    assert oor["responses"][0]["partitions"][0]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE

    lo = raw.call(
        2,
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": "proto-a",
                    "partitions": [
                        {"partition_index": 0, "timestamp": -2},
                        {"partition_index": 1, "timestamp": -1},
                    ],
                }
            ],
        },
    )
    offsets = [p["offset"] for p in lo["topics"][0]["partitions"]]
    assert offsets == [0, 0]
    latest = raw.call(
        2,
        2,
        {
            "replica_id": -1,
            "topics": [{"name": "proto-a", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    assert latest["topics"][0]["partitions"][0]["offset"] == 4


def test_long_poll_is_woken_by_produce(broker: BrokerProcess, raw: Raw) -> None:
    raw.call(
        19,
        4,
        {
            "topics": [{"name": "proto-poll", "num_partitions": 1, "replication_factor": 1}],
            "timeout_ms": 5000,
        },
    )
    raw.corr += 1
    # max_wait far beyond the read timeout below: only the append can answer the fetch in time, and the
    # read timeout itself is generous (a loaded machine may be slow to wake, but not by minutes).
    fetch_req = {
        "replica_id": -1,
        "max_wait_ms": 600_000,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": "proto-poll",
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    raw.sock.sendall(encode_request(RequestHeader(1, 11, raw.corr, "poll"), fetch_req))
    other = Raw(broker.port)
    try:
        from kafkad.storage.records import SimpleRecord, build_batch

        other.call(
            0,
            8,
            {
                "acks": 1,
                "timeout_ms": 5000,
                "topic_data": [
                    {
                        "name": "proto-poll",
                        "partition_data": [
                            {
                                "index": 0,
                                "records": build_batch(
                                    [SimpleRecord(None, b"wake", timestamp=1_700_000_000_000)]
                                ),
                            }
                        ],
                    }
                ],
            },
        )
    finally:
        other.close()
    raw.sock.settimeout(120)  # far below max_wait_ms: only the append can have answered it
    corr, body = decode_response(1, 11, raw.recv_frame())
    assert corr == raw.corr
    assert b"wake" in bytes(body["responses"][0]["partitions"][0]["records"])


def test_golden_frames_get_sensible_answers(broker: BrokerProcess) -> None:
    lines = [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]
    topics = set()
    for d in lines:
        if d["api_key"] in (0, 1):
            req = decode_request(bytearray.fromhex(d["frame_hex"]))
            key = "topic_data" if d["api_key"] == 0 else "topics"
            topics |= {t.get("name") or t.get("topic") for t in req.body[key]}
    admin = Raw(broker.port)
    admin.call(
        19,
        4,
        {
            "topics": [{"name": t, "num_partitions": 3, "replication_factor": 1} for t in sorted(topics)],
            "timeout_ms": 5000,
        },
    )
    admin.close()
    answered = 0
    for d in lines:
        frame = bytes.fromhex(d["frame_hex"])
        api_key, version = d["api_key"], d["api_version"]
        conn = Raw(broker.port)
        try:
            conn.send_frame(frame)
            if api_key == 0 and decode_request(bytearray(frame)).body["acks"] == 0:
                continue
            (corr,) = struct.unpack_from(">i", frame, 4)
            response = conn.recv_frame()
            got_corr, body = decode_response(api_key, version, response)  # ApiVersions v4 too, now served
            assert got_corr == corr, d
            codes = list(error_codes(body))
            assert ErrorCode.UNKNOWN_SERVER_ERROR not in codes, (d["client_id"], api_key, version, body)
            if api_key in ADVERTISED:
                assert ErrorCode.UNSUPPORTED_VERSION not in codes, (api_key, version, body)
            if api_key == 0:
                assert set(codes) <= {
                    0,
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    ErrorCode.UNKNOWN_PRODUCER_ID,
                }, body
            answered += 1
        finally:
            conn.close()
    assert answered >= len(lines) - 5
    assert_alive(broker)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http"),
        pytest.param(struct.pack(">i", 200 * 1024 * 1024) + b"x" * 100, id="oversize"),
        pytest.param(struct.pack(">i", -5), id="negative"),
        pytest.param(
            struct.pack(">i", 10) + struct.pack(">hhi", 3, 8, 1) + b"\x00\x05", id="truncated-client-id"
        ),
        pytest.param(struct.pack(">i", 8) + struct.pack(">hhi", 3, 8, 1), id="truncated-header"),
    ],
)
def test_bad_input_closes_only_that_connection(broker: BrokerProcess, data: bytes) -> None:
    bystander = Raw(broker.port)
    bad = Raw(broker.port)
    try:
        bad.send_raw(data)
        assert bad.is_closed_by_peer()
        assert bystander.call(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0
    finally:
        bad.close()
        bystander.close()
    assert_alive(broker)


def test_truncated_body_closes(broker: BrokerProcess) -> None:
    good = encode_request(RequestHeader(3, 8, 5, "t"), {"topics": [{"name": "proto-a"}]})[4:]
    bad = Raw(broker.port)
    try:
        bad.send_frame(good[:-3])
        assert bad.is_closed_by_peer()
    finally:
        bad.close()
    assert_alive(broker)


def test_unknown_api_key_does_not_kill_broker(broker: BrokerProcess) -> None:
    r = Raw(broker.port)
    try:
        r.send_frame(struct.pack(">hhih", 999, 0, 3, -1))
        assert r.is_closed_by_peer()
    finally:
        r.close()
    assert_alive(broker)


def test_pipelined_requests_answer_in_order(raw: Raw) -> None:
    frames = b""
    for corr in range(100, 140):
        version = corr % 4 if corr % 2 else 8
        api = 18 if corr % 2 else 3
        body: dict[str, Any] = {} if api == 18 else {"topics": None}
        frames += encode_request(
            RequestHeader(api, version if api == 3 else min(version, 2), corr, "p"), body
        )
    raw.send_raw(frames)
    seen = [struct.unpack_from(">i", raw.recv_frame())[0] for _ in range(40)]
    assert seen == list(range(100, 140))


def test_sigterm_exits_cleanly(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "b")
    b.start()
    r = Raw(b.port)
    r.call(
        19, 4, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000}
    )
    r.close()
    assert b.stop() == 0
    assert (b.data_dir / ".kafka_cleanshutdown").exists()
    assert "shut down cleanly" in b.log_text()
    b.start()
    r = Raw(b.port)
    md = r.call(3, 8, {"topics": None})
    r.close()
    assert [t["name"] for t in md["topics"] if not t["is_internal"]] == ["t"]
    assert b.stop() == 0
