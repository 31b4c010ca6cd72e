"""The log cleaner's view of a PartitionLog: its cleanable segments, and swapping cleaned ones in.

`cleanable_segments` lists the closed segments (the cleaner never touches the active one).
`replace_segments` runs on the event loop once the cleaner thread wrote a group's cleaned files: it
checks the group is still a run of live segments of the log (truncation, retention or deletion may
have raced the cleaner), then renames only (cleaner_swap): commit, old segments to the log's delayed
deletion, final names; the new segment opens on the existing trimmed indexes. Reads in flight keep
the old fds. PartitionLog passes in its own SegmentList and deletion scheduler: only the log changes
them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkad.storage.cleaner_swap import commit_swap, finish_swap
from kafkad.storage.segment import LogSegment
from kafkad.storage.segment_list import SegmentList

if TYPE_CHECKING:
    from kafkad.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["cleanable_segments", "replace_segments"]


def cleanable_segments(plog: PartitionLog) -> list[tuple[LogSegment, int]]:
    """The closed segments (never the active one) with the base of the segment after each."""
    return plog.segments.closed()


def replace_segments(
    plog: PartitionLog,
    segments: SegmentList,
    old: list[LogSegment],
    base_offset: int,
    end_offset: int,
    schedule_delete: Callable[[LogSegment], None],
) -> bool:
    """Swap the cleaned files of `base_offset` in place of `old` in `plog`'s `segments`; False (nothing
    renamed) if refused. `schedule_delete` hands a replaced segment to the log's delayed deletion."""
    if segments.run_index(old, end_offset) is None or old[0].base_offset != base_offset:
        return False
    try:
        commit_swap(plog.directory, base_offset)
    except OSError as exc:  # e.g. the topic was deleted: its dir was renamed
        log.warning("%s: cleaned segment %d not swapped in: %s", plog.directory, base_offset, exc)
        return False
    for seg in old:
        schedule_delete(seg)
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
    swapped = segments.replace_run(old, new, end_offset)
    assert swapped, "checked above, and nothing ran on the loop since"
    return True
