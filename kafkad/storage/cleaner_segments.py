"""The log cleaner's view of a PartitionLog: its cleanable segments, and swapping cleaned ones in.

`cleanable_segments` lists the closed segments (the cleaner never touches the active one).
`replace_segments` runs on the event loop once the cleaner thread wrote a group's cleaned files: it
checks the group is still a run of live segments of the log (truncation, retention or deletion may
have raced the cleaner), then renames only (cleaner_swap): commit, old segments to the log's delayed
deletion, final names; the new segment opens on the existing trimmed indexes. Reads in flight keep
the old fds.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkad.storage.cleaner_swap import commit_swap, finish_swap
from kafkad.storage.segment import LogSegment

if TYPE_CHECKING:
    from kafkad.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["cleanable_segments", "replace_segments"]


def cleanable_segments(plog: PartitionLog) -> list[tuple[LogSegment, int]]:
    """The closed segments (never the active one) with the base of the segment after each."""
    bases = plog._bases
    return [(s, bases[i + 1]) for i, s in enumerate(plog._segments[:-1])]


def replace_segments(plog: PartitionLog, old: list[LogSegment], base_offset: int, end_offset: int) -> bool:
    """Swap the cleaned files of `base_offset` in place of `old`; False (nothing renamed) if refused."""
    segs = plog._segments
    try:
        i = next(k for k, s in enumerate(segs) if s is old[0])
    except StopIteration:
        return False
    run = segs[i : i + len(old)]
    if (
        i + len(old) >= len(segs)
        or len(run) != len(old)
        or any(a is not b or a.deleted for a, b in zip(run, old, strict=True))
        or old[0].base_offset != base_offset
        or plog._bases[i + len(old)] != end_offset
    ):
        return False
    try:
        commit_swap(plog.directory, base_offset)
    except OSError as exc:  # e.g. the topic was deleted: its dir was renamed
        log.warning("%s: cleaned segment %d not swapped in: %s", plog.directory, base_offset, exc)
        return False
    for seg in old:
        plog._schedule_delete(seg)
    finish_swap(plog.directory, base_offset)
    new = LogSegment(
        plog.directory,
        base_offset,
        index_bytes=plog.config.segment_index_bytes,
        index_interval_bytes=plog.config.index_interval_bytes,
        now_ms=plog.clock.time_ms(),
    )
    new.offset_index.trim()  # an empty cleaned index opens preallocated
    new.time_index.trim()
    new.read_next_offset()  # max timestamp of the batches after the last time index entry
    plog._segments[i : i + len(old)] = [new]
    plog._bases[i : i + len(old)] = [base_offset]
    return True
