"""A follower's parked Fetch that waits for bytes (Kafka's DelayedFetch for replica fetches).

Kafka completes a parked fetch once the bytes appended past each partition's fetch position add up to
fetch.min.bytes (DelayedFetch.tryComplete accumulates log position differences; it never re-reads the
log per append), or at fetch.max.wait.ms. kafkad does the same for a follower's Fetch: the handler
(api/fetch.py) parks one future with one `BytesWanted` shared by every partition it watches; each
partition keeps a `Mark` of the active segment and its size when the fetch parked, and on each append
(Partition._wake_append_waiters) adds what its active segment grew by. The future is resolved when the
count reaches min.bytes, when the active segment rolled (as Kafka's case of a fetch offset on an older
segment: the next read brings that segment's tail at least) or unconditionally on a role change,
truncation or deletion. The handler then reads once, so `replica.fetch.min.bytes` trades round trips (the
follower's and the leader's CPU per GiB) against acks=all latency, which the follower's next fetch ends.
A wait for one byte (Kafka's default min.bytes) needs no count: any append resolves it.

An append never resolves a waiter itself: it schedules the resolution (`_settle`, call_soon) and marks
the waiter `SETTLING`, so the handler's read runs after the loop's next poll for I/O, and the appends of
the Produce requests that poll brings ride in the same answer. Resolved at once, the fetch Task ran before
that poll, and a leader busy with a pipelined producer answered its followers 1.6 batches per fetch (5
requests in flight); deferred, 2.4, and the followers' CPU per GiB fell by a quarter, the leader's by an
eighth (docs/performance.md, session 8). Idle, the deferral costs one loop iteration (microseconds).
"""

from __future__ import annotations

import asyncio
from typing import Any


class BytesWanted:
    """How many more bytes a parked follower Fetch waits for, over all its partitions."""

    __slots__ = ("needed",)

    def __init__(self, needed: int) -> None:
        self.needed = needed


class Mark:
    """Where one partition's count of a BytesWanted stands: its active segment and that segment's size."""

    __slots__ = ("position", "segment", "wanted")

    def __init__(self, wanted: BytesWanted, segment: Any, position: int) -> None:
        self.wanted = wanted
        self.segment = segment
        self.position = position


SETTLING = Mark(BytesWanted(0), None, 0)  # a waiter whose resolution is scheduled (`_settle`)


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():  # cancelled meanwhile (the fetch's connection closed), or resolved by a release
        fut.set_result(None)


def _settle_soon(marks: dict[asyncio.Future[None], Mark | None], fut: asyncio.Future[None]) -> None:
    marks[fut] = SETTLING
    fut.get_loop().call_soon(_settle, fut)


def end_position(log: Any) -> tuple[Any, int]:
    """(active segment, its size in bytes) of a PartitionLog."""
    seg = log.active_segment
    return seg, int(seg.size)


def mark(log: Any, wanted: BytesWanted) -> Mark:
    seg, position = end_position(log)
    return Mark(wanted, seg, position)


def count(marks: dict[asyncio.Future[None], Mark | None], log: Any) -> None:
    """An append to `log`: settle (soon) the waiters in `marks` it satisfies (None: any append does)."""
    seg: Any = None
    position = -1
    for fut, m in list(marks.items()):
        if m is SETTLING or fut.done():
            continue
        if m is None:
            _settle_soon(marks, fut)
            continue
        if position < 0:
            seg, position = end_position(log)
        if m.segment is not seg:  # rolled: read now
            _settle_soon(marks, fut)
            continue
        wanted = m.wanted
        wanted.needed -= position - m.position
        m.position = position
        if wanted.needed <= 0:
            _settle_soon(marks, fut)
