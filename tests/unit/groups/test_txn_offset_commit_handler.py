"""The TxnOffsetCommit handler through the real Dispatcher on a real LogManager: the KIP-890 check with the
transaction coordinator (`txn_verifier`) runs in its own task, since the dispatcher steps a handler's
coroutine outside any task at first and a remote check uses asyncio.timeout (which needs one: the cluster
chaos run logged "Timeout should be used inside a task" for every TxnOffsetCommit before the fix); a
refusal is answered per partition; an accepted commit is pending, and require_stable sees it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kafkad.coordinator.group.service import coordinator_for
from kafkad.network.dispatcher import Dispatcher
from kafkad.network.registry import REGISTRY
from kafkad.protocol import ApiKey, ErrorCode, RequestHeader, decode_response, encode_request
from tests.unit.daemon.test_handlers import create, make_broker


class _Verifier:
    """Answers like a remote coordinator: after a round trip bounded by asyncio.timeout."""

    def __init__(self, answer: ErrorCode) -> None:
        self.answer = answer
        self.asked: list[tuple[str, int, int, str, int]] = []

    async def verify(self, txn_id: str, pid: int, epoch: int, topic: str, partition: int) -> ErrorCode:
        self.asked.append((txn_id, pid, epoch, topic, partition))
        async with asyncio.timeout(5):
            await asyncio.sleep(0)
        return self.answer


def _request(api: int, version: int, body: dict[str, Any]) -> bytearray:
    return bytearray(encode_request(RequestHeader(api, version, 7, "test"), body)[4:])


async def _dispatch(d: Dispatcher, api: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """As a connection does: dispatch from a loop callback (data_received), outside any task."""
    loop = asyncio.get_running_loop()
    result: asyncio.Future[Any] = loop.create_future()

    def received() -> None:
        try:
            result.set_result(d.dispatch(_request(api, version, body), "peer"))
        except Exception as e:
            result.set_exception(e)

    loop.call_soon(received)
    out = await result
    if isinstance(out, asyncio.Task):
        out = await out
    assert out is not None
    frame = b"".join(bytes(c) for c in out)  # type: ignore[arg-type]
    return decode_response(api, version, frame[4:])[1]


COMMIT = {
    "transactional_id": "tx",
    "group_id": "g",
    "producer_id": 42,
    "producer_epoch": 0,
    "generation_id": -1,
    "member_id": "",
    "group_instance_id": None,
    "topics": [
        {
            "name": "in",
            "partitions": [{"partition_index": 0, "committed_offset": 9, "committed_metadata": ""}],
        }
    ],
}


async def _ready(d: Dispatcher) -> None:
    """__consumer_offsets created (FindCoordinator): the handler's first step then runs to the verifier."""
    found = await _dispatch(d, ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})
    assert found["error_code"] == 0


def _code(body: dict[str, Any]) -> int:
    code: int = body["topics"][0]["partitions"][0]["error_code"]
    return code


def test_verified_commit_is_pending_and_unstable(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, "offsets.topic.num.partitions=3")
    create(broker, "in")
    verifier = _Verifier(ErrorCode.NONE)

    async def run() -> tuple[int, int, int]:
        d = Dispatcher(broker, REGISTRY)
        await _ready(d)
        broker.txn_verifier = verifier
        committed = _code(await _dispatch(d, ApiKey.TXN_OFFSET_COMMIT, 3, COMMIT))
        fetch = {
            "group_id": "g",
            "topics": [{"name": "in", "partition_indexes": [0]}],
            "require_stable": True,
        }
        stable = (await _dispatch(d, ApiKey.OFFSET_FETCH, 7, fetch))["topics"][0]["partitions"][0]
        loose = (await _dispatch(d, ApiKey.OFFSET_FETCH, 7, {**fetch, "require_stable": False}))["topics"][0]
        return committed, stable["error_code"], loose["partitions"][0]["committed_offset"]

    assert asyncio.run(run()) == (0, ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
    index = coordinator_for(broker).offsets_partition_count
    assert verifier.asked and verifier.asked[0][:4] == ("tx", 42, 0, "__consumer_offsets")
    assert verifier.asked[0][4] < index


def test_refused_by_the_coordinator(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, "offsets.topic.num.partitions=3")
    create(broker, "in")

    async def run() -> int:
        d = Dispatcher(broker, REGISTRY)
        await _ready(d)
        broker.txn_verifier = _Verifier(ErrorCode.INVALID_TXN_STATE)
        return _code(await _dispatch(d, ApiKey.TXN_OFFSET_COMMIT, 3, COMMIT))

    assert asyncio.run(run()) == ErrorCode.INVALID_TXN_STATE
    assert coordinator_for(broker).unstable_partitions("g") == set()
