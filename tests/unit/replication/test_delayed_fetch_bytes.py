"""A follower's parked Fetch counts the bytes appended since it parked (Kafka's DelayedFetch): it is read
again once they reach replica.fetch.min.bytes, at max_wait, or on a role change; never once per append.

Real broker handler and PartitionLog (tests.unit.daemon.test_handlers); a standalone leader serves a
replica_id >= 0 Fetch as a cluster leader does (up to its log end). max_wait is ten minutes unless a test
is about the wait, so a fetch that returns was woken by the bytes or the role change.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kafkad.replication.partition import Partition
from tests.unit.daemon.test_handlers import batch, create, fetch_body, make_broker
from tests.unit.replication.test_fetch_wakeup import TEN_MINUTES_MS, _fetch_task, _settle

FOLLOWER = 5
VALUE = b"v" * 200


def _follower_body(offset: int, min_bytes: int, max_wait: int = TEN_MINUTES_MS) -> dict[str, Any]:
    body = fetch_body("t", offset, max_wait=max_wait, min_bytes=min_bytes)
    body["replica_id"] = FOLLOWER
    body["isolation_level"] = 0
    return body


def _counting_reads(part: Partition) -> list[int]:
    reads: list[int] = []
    read = part.read_records

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[0])
        return read(*args, **kwargs)

    part.read_records = counted  # type: ignore[method-assign]
    return reads


def _fetched(out: Any) -> bytes:
    return b"".join(s.read() for s in out["responses"][0]["partitions"][0]["records"])


def test_parked_follower_fetch_reads_once_when_appended_bytes_reach_min_bytes(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    part = b.replicas.get_or_raise("t", 0)
    size = len(batch(VALUE))
    reads = _counting_reads(part)

    async def go() -> Any:
        task = _fetch_task(b, _follower_body(0, min_bytes=2 * size + 1))
        await _settle()
        for i in range(3):
            assert not task.done(), f"answered after {i} of 3 batches"
            part.append_as_leader(batch(VALUE), now_ms=0, required_acks=1)
            await _settle()
        return await asyncio.wait_for(task, 60)

    out = asyncio.run(go())
    assert _fetched(out).count(VALUE) == 3
    assert reads == [0, 0]  # the read that parked and the one after min.bytes: none per append
    assert not part._append_waiters


def test_parked_follower_fetch_counts_bytes_over_all_its_partitions(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t", n=2)
    p0, p1 = b.replicas.get_or_raise("t", 0), b.replicas.get_or_raise("t", 1)
    size = len(batch(VALUE))
    body = _follower_body(0, min_bytes=size + 1)
    parts = body["topics"][0]["partitions"]
    parts.append({**parts[0], "partition": 1})
    reads = _counting_reads(p0)

    async def go() -> Any:
        task = _fetch_task(b, body)
        await _settle()
        p0.append_as_leader(batch(VALUE), now_ms=0, required_acks=1)
        await _settle()
        assert not task.done()
        p1.append_as_leader(batch(VALUE), now_ms=0, required_acks=1)
        return await asyncio.wait_for(task, 60)

    out = asyncio.run(go())
    assert [len(p["records"]) for p in out["responses"][0]["partitions"]] == [1, 1]
    assert reads == [0, 0]  # p0's append alone did not reach min.bytes: no read for it
    assert not p0._append_waiters and not p1._append_waiters


def test_parked_follower_fetch_answers_what_it_has_at_max_wait(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    part = b.replicas.get_or_raise("t", 0)
    reads = _counting_reads(part)

    async def go() -> Any:
        task = _fetch_task(b, _follower_body(0, min_bytes=1 << 30, max_wait=20))
        await _settle()
        part.append_as_leader(batch(VALUE), now_ms=0, required_acks=1)
        return await asyncio.wait_for(task, 60)

    out = asyncio.run(go())
    assert _fetched(out).count(VALUE) == 1
    assert reads == [0, 0]  # parked, then read at max_wait: the append below min.bytes read nothing
    assert not part._append_waiters


def test_parked_follower_fetch_is_released_by_a_leadership_change(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    part = b.replicas.get_or_raise("t", 0)
    reads = _counting_reads(part)

    async def go() -> Any:
        task = _fetch_task(b, _follower_body(0, min_bytes=1 << 30))
        await _settle()
        part.append_as_leader(batch(VALUE), now_ms=0, required_acks=1)
        await _settle()
        assert not task.done()
        part.become_follower(part.leader_epoch + 1, 2)
        return await asyncio.wait_for(task, 60)

    out = asyncio.run(go())
    p = out["responses"][0]["partitions"][0]
    assert p["error_code"] != 0 and p["records"] in ([], b"")  # no longer the leader: answered now
    assert len(reads) == 1 and not part._append_waiters


def test_one_byte_waiter_is_resolved_by_any_append_and_a_roll_resolves_a_counting_one(tmp_path: Path) -> None:
    """min.bytes 1 (Kafka's default) keeps the plain wake; a counting waiter whose active segment rolled
    is resolved (the read from its position brings that segment's tail), as Kafka's DelayedFetch."""
    from kafkad.replication.delayed_fetch import BytesWanted

    b = make_broker(tmp_path)
    create(b, "t")
    part = b.replicas.get_or_raise("t", 0)

    async def go() -> None:
        loop = asyncio.get_running_loop()
        plain, counting = loop.create_future(), loop.create_future()
        part.add_append_waiter(plain)
        part.add_append_waiter(counting, BytesWanted(1 << 30))
        part.append_as_leader(batch(b"x"), now_ms=0, required_acks=1)
        assert not plain.done()  # settled on the loop's next iteration (delayed_fetch._settle)
        await asyncio.sleep(0)
        assert plain.done() and not counting.done()
        part.log.roll()  # type: ignore[attr-defined]
        part.append_as_leader(batch(b"y"), now_ms=0, required_acks=1)
        await asyncio.sleep(0)
        assert counting.done()

    asyncio.run(go())


def test_appends_before_the_settle_ride_in_the_same_answer(tmp_path: Path) -> None:
    """An append schedules the parked fetch's resolution instead of resolving it: what the loop runs
    before that (the next poll's Produce requests) is appended first and read by the same answer. Resolved
    at once, the fetch's Task ran first and answered one batch."""
    b = make_broker(tmp_path)
    create(b, "t")
    part = b.replicas.get_or_raise("t", 0)
    reads = _counting_reads(part)

    async def go() -> Any:
        loop = asyncio.get_running_loop()
        task = _fetch_task(b, _follower_body(0, min_bytes=1))
        await _settle()
        part.append_as_leader(batch(b"first"), now_ms=0, required_acks=1)
        loop.call_soon(lambda: part.append_as_leader(batch(b"second"), now_ms=0, required_acks=1))
        return await asyncio.wait_for(task, 60)

    out = asyncio.run(go())
    got = _fetched(out)
    assert b"first" in got and b"second" in got
    assert reads == [0, 0]
    assert not part._append_waiters


def test_a_waiter_gone_before_its_settle_is_left_alone(tmp_path: Path) -> None:
    """The fetch's connection closed (its future cancelled) between the append and the settle."""
    b = make_broker(tmp_path)
    create(b, "t")
    part = b.replicas.get_or_raise("t", 0)

    async def go() -> None:
        fut = asyncio.get_running_loop().create_future()
        part.add_append_waiter(fut)
        part.append_as_leader(batch(b"x"), now_ms=0, required_acks=1)
        part.append_as_leader(batch(b"y"), now_ms=0, required_acks=1)  # one settle is scheduled, not two
        fut.cancel()
        part.discard_append_waiter(fut)
        await asyncio.sleep(0)
        assert fut.cancelled()

    asyncio.run(go())
