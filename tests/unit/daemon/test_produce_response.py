"""Produce handler: lean success responses, zstd gating by version, acks=-1 waits after all appends."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kafkad.network.registry import REGISTRY, RequestContext
from kafkad.protocol import ErrorCode, Request, RequestHeader
from kafkad.protocol.codec import decode_response, encode_response_bytes
from kafkad.storage.records import Compression, SimpleRecord, build_batch
from tests.unit.daemon.test_handlers import batch, create, make_broker, produce


class RecordingMetrics:
    def __init__(self) -> None:
        self.produced: list[tuple[str, int, int]] = []
        self.failed: list[str] = []

    def record_produce(self, topic: str, nbytes: int, messages: int) -> None:
        self.produced.append((topic, nbytes, messages))

    def record_failed_produce(self, topic: str) -> None:
        self.failed.append(topic)


def zstd_batch() -> memoryview:
    records = [SimpleRecord(None, b"z", timestamp=1)]
    return memoryview(bytearray(build_batch(records, compression=Compression.ZSTD)))


def first(resp: Any) -> Any:
    return resp["responses"][0]["partition_responses"][0]


def test_zstd_is_refused_below_v7_only(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    assert first(produce(b, 6, 1, zstd_batch()))["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert first(produce(b, 3, 1, zstd_batch()))["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    ok = first(produce(b, 7, 1, zstd_batch()))
    assert (ok["error_code"], ok["base_offset"]) == (0, 0)
    assert b.replicas.get_or_raise("t", 0).log_end_offset == 1
    # Below v7 an uncompressed batch still passes the walk.
    assert first(produce(b, 6, 1, batch(b"a")))["base_offset"] == 1


def test_success_response_encodes_schema_defaults(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    metrics = RecordingMetrics()
    b.metrics = metrics  # type: ignore[assignment]
    produce(b, 8, 1, batch(b"a"))
    body = produce(b, 8, 1, batch(b"b", b"c"))
    header = RequestHeader(0, 8, 7, "test")
    _, decoded = decode_response(0, 8, encode_response_bytes(header, body)[4:])
    p = first(decoded)
    assert decoded["responses"][0]["name"] == "t"
    assert (p["index"], p["error_code"], p["base_offset"]) == (0, 0, 1)
    assert (p["log_append_time_ms"], p["log_start_offset"]) == (-1, 0)
    assert p["record_errors"] == [] and p["error_message"] is None
    assert metrics.produced[-1][0::2] == ("t", 2) and not metrics.failed


def run_produce(b: Any, body: dict[str, Any]) -> asyncio.Task[Any]:
    spec = REGISTRY.get(0)
    assert spec is not None
    header = RequestHeader(0, 8, 1, "test")
    return asyncio.ensure_future(spec.fn(RequestContext(b, header), Request(header, body)))


def two_partitions(timeout_ms: int) -> dict[str, Any]:
    return {
        "acks": -1,
        "timeout_ms": timeout_ms,
        "transactional_id": None,
        "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": batch(b"a")}]},
            {"name": "u", "partition_data": [{"index": 0, "records": batch(b"b", b"c")}]},
        ],
    }


def test_acks_all_appends_everything_then_waits_for_each_follower(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    create(b, "u")
    t, u = b.replicas.get_or_raise("t", 0), b.replicas.get_or_raise("u", 0)
    for p in (t, u):
        p.become_leader(1, isr=(0, 5), replicas=(0, 5))

    async def go() -> None:
        task = run_produce(b, two_partitions(600_000))
        for _ in range(5):
            await asyncio.sleep(0)
        # Both partitions appended before any waiting; neither is committed yet.
        assert (t.log_end_offset, u.log_end_offset) == (1, 2)
        assert not task.done()
        t.update_follower_position(5, 1)
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()  # u's follower has not caught up
        u.update_follower_position(5, 2)
        resp = await asyncio.wait_for(task, 60)
        got = [(r["name"], first({"responses": [r]})["error_code"]) for r in resp["responses"]]
        assert got == [("t", 0), ("u", 0)]
        assert first({"responses": [resp["responses"][1]]})["base_offset"] == 0

    asyncio.run(go())


def test_acks_all_timeout_and_leadership_loss_fail_only_their_partition(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    create(b, "u")
    metrics = RecordingMetrics()
    b.metrics = metrics  # type: ignore[assignment]
    t = b.replicas.get_or_raise("t", 0)
    t.become_leader(1, isr=(0, 5), replicas=(0, 5))

    async def go() -> None:
        # timeout 0: t (waiting on its follower) times out at once; u (ISR = {0}) is committed.
        resp = await asyncio.wait_for(run_produce(b, two_partitions(0)), 60)
        pt, pu = (first({"responses": [r]}) for r in resp["responses"])
        assert (pt["index"], pt["error_code"], pt["base_offset"]) == (0, ErrorCode.REQUEST_TIMED_OUT, -1)
        assert (pu["error_code"], pu["base_offset"]) == (0, 0)
        assert metrics.failed == ["t"]

        task = run_produce(b, two_partitions(600_000))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()
        t.become_follower(2, 5)
        resp = await asyncio.wait_for(task, 60)
        pt, pu = (first({"responses": [r]}) for r in resp["responses"])
        assert pt["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER and pt["record_errors"] == []
        assert (pu["error_code"], pu["base_offset"]) == (0, 2)
        assert metrics.failed == ["t", "t"]

    asyncio.run(go())


def test_request_context_builds_no_extra_dict(tmp_path: Path) -> None:
    ctx = RequestContext(make_broker(tmp_path), RequestHeader(0, 8, 1, "c"))
    assert ctx.extra is None and ctx.version == 8
