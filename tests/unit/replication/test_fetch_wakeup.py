"""Delayed-fetch wake-ups: a parked Fetch returns as soon as an append makes data available.

No lost wake-up: the handler registers its waiter right after reading, with no await in between, so
an append that lands the moment it parks still wakes it. max_wait is ten minutes in every test, so
a fetch that returns at all was woken by the append (the 60 s bound on waiting for it only keeps a
regression from hanging the suite).
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

from kafkad.api.broker import Broker
from kafkad.network.registry import REGISTRY, RequestContext
from kafkad.protocol import Request, RequestHeader
from kafkad.replication.partition import Partition
from tests.unit.daemon.test_handlers import batch, create, fetch_body, make_broker
from tests.unit.replication.test_partition import FakeLog

TEN_MINUTES_MS = 600_000


def _fetch_task(b: Broker, body: dict[str, Any]) -> asyncio.Task[Any]:
    spec = REGISTRY.get(1)
    assert spec is not None
    header = RequestHeader(1, 11, 1, "c")
    return asyncio.ensure_future(spec.fn(RequestContext(b, header), Request(header, body)))


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _two_partition_body(offset: int) -> dict[str, Any]:
    body = fetch_body("t", offset, max_wait=TEN_MINUTES_MS)
    parts = body["topics"][0]["partitions"]
    parts.append({**parts[0], "partition": 1})
    return body


def test_shared_waiter_is_woken_by_either_partition_and_can_be_discarded() -> None:
    async def go() -> None:
        a, b = Partition(FakeLog(partition=0), broker_id=1), Partition(FakeLog(partition=1), broker_id=1)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        a.add_data_waiter(fut)
        b.add_data_waiter(fut)
        b.append_as_leader(memoryview(b"x"), now_ms=0, required_acks=1)
        assert fut.done()
        a.append_as_leader(memoryview(b"y"), now_ms=0, required_acks=1)  # already done: no error
        later: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        a.add_data_waiter(later)
        a.discard_data_waiter(later)
        a.append_as_leader(memoryview(b"z"), now_ms=0, required_acks=1)
        assert not later.done()  # discarded waiters are not woken

    asyncio.run(go())


def test_follower_catching_up_moves_the_hw_and_wakes_consumers() -> None:
    async def go() -> None:
        p = Partition(FakeLog(), broker_id=1)
        p.become_leader(1, isr=(1, 2), replicas=(1, 2))
        p.append_as_leader(memoryview(b"abc"), now_ms=0, required_acks=1)
        assert p.high_watermark == 0  # the follower has not fetched yet
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        p.add_data_waiter(fut)
        p.update_follower_position(2, 3)
        assert p.high_watermark == 3
        assert fut.done()

    asyncio.run(go())


def test_parked_fetch_woken_by_append_that_lands_as_it_parks(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    part = b.replicas.get_or_raise("t", 0)
    loop_calls: list[str] = []
    read = part.read_records

    def read_then_append(*args: Any, **kwargs: Any) -> Any:
        result = read(*args, **kwargs)
        if not loop_calls:  # first read finds nothing; the append runs right after the handler parks
            loop_calls.append("append")
            append = functools.partial(part.append_as_leader, batch(b"hi"), now_ms=0, required_acks=1)
            asyncio.get_running_loop().call_soon(append)
        return result

    part.read_records = read_then_append  # type: ignore[method-assign]

    async def go() -> Any:
        task = _fetch_task(b, fetch_body("t", 0, max_wait=TEN_MINUTES_MS))
        return await asyncio.wait_for(task, 60)

    out = asyncio.run(go())
    p = out["responses"][0]["partitions"][0]
    assert p["high_watermark"] == 1
    assert b"hi" in b"".join(s.read() for s in p["records"])
    assert loop_calls == ["append"]


def test_fetch_on_two_partitions_woken_by_the_second_and_leaves_no_waiters(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t", n=2)
    p0, p1 = b.replicas.get_or_raise("t", 0), b.replicas.get_or_raise("t", 1)

    async def go() -> Any:
        task = _fetch_task(b, _two_partition_body(0))
        await _settle()
        assert not task.done()  # parked: nothing to read anywhere
        p1.append_as_leader(batch(b"one"), now_ms=0, required_acks=1)
        return await asyncio.wait_for(task, 60)

    out = asyncio.run(go())
    parts = {p["partition_index"]: p for p in out["responses"][0]["partitions"]}
    assert parts[0]["records"] == [] and parts[1]["high_watermark"] == 1
    assert b"one" in b"".join(s.read() for s in parts[1]["records"])
    assert not p0._data_waiters and not p1._data_waiters


def test_cancelled_parked_fetch_leaves_no_waiters(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t", n=2)
    parts = [b.replicas.get_or_raise("t", i) for i in (0, 1)]

    async def go() -> None:
        task = _fetch_task(b, _two_partition_body(0))
        await _settle()
        assert all(p._data_waiters for p in parts)  # parked on both
        task.cancel()
        await _settle()
        assert task.cancelled()

    asyncio.run(go())
    assert not any(p._data_waiters for p in parts)
