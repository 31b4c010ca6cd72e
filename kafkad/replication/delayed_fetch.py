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


def end_position(log: Any) -> tuple[Any, int]:
    """(active segment, its size in bytes) of a PartitionLog; (None, 0) for a log without segments (a
    test's fake), whose waiters any append then resolves."""
    try:
        seg = log.active_segment
    except AttributeError:
        return None, 0
    return seg, int(seg.size)


def mark(log: Any, wanted: BytesWanted) -> Mark:
    seg, position = end_position(log)
    return Mark(wanted, seg, position)


def count(marks: dict[asyncio.Future[None], Mark | None], log: Any) -> None:
    """An append to `log`: resolve the waiters in `marks` it satisfies (None: any append does)."""
    seg: Any = None
    position = -1
    for fut, m in list(marks.items()):
        if fut.done():
            continue
        if m is None:
            fut.set_result(None)
            continue
        if position < 0:
            seg, position = end_position(log)
        if seg is None or m.segment is not seg:  # rolled (or no segments to count): read now
            fut.set_result(None)
            continue
        wanted = m.wanted
        wanted.needed -= position - m.position
        m.position = position
        if wanted.needed <= 0:
            fut.set_result(None)
