"""A partition log's segments, oldest first, with their base offsets, kept as one unit (`SegmentList`).

Invariants kept by every method: `bases[i] == segments[i].base_offset`, strictly increasing; the last
segment is the active one (appends go there) and no method removes it except `reset`; `active` is a
plain slot kept equal to the last segment, so the append hot path pays one attribute load. Lookups
bisect on the bases. The list is empty only before a log is loaded and after it is closed or released
(`active` is then unset).

Only the owning PartitionLog changes the list; everyone else sees it through `SegmentView` (the
read-only part, `PartitionLog.segments`). Removed segments are returned to the caller, which schedules
their deletion: this class never touches files.

Concurrency: changed on the event loop only. `snapshot()` is a copy an executor thread may read (flush).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from kafkad.storage.segment import LogSegment

__all__ = ["SegmentList", "SegmentView"]


class SegmentView(Protocol):
    """Read-only view of a log's segments (what PartitionLog hands out)."""

    @property
    def active(self) -> LogSegment: ...

    @property
    def first_base(self) -> int: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[LogSegment]: ...

    def __getitem__(self, i: int) -> LogSegment: ...

    def index_of(self, offset: int) -> int: ...

    def locate(self, offset: int) -> tuple[int, LogSegment, int | None]: ...

    def next_base(self, i: int) -> int | None: ...

    def end_offset(self, seg: LogSegment, log_end_offset: int) -> int: ...

    def closed(self) -> list[tuple[LogSegment, int]]: ...

    def from_offset(self, offset: int) -> list[LogSegment]: ...

    def snapshot(self) -> list[LogSegment]: ...


class SegmentList:
    """The ordered segments of one log and their base offsets (see the module docstring)."""

    __slots__ = ("_bases", "_segments", "active")

    active: LogSegment  # the last segment; unset while the list is empty

    def __init__(self, segments: Iterable[LogSegment] = ()) -> None:
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.reset(segments)

    # ---- reading -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def __getitem__(self, i: int) -> LogSegment:
        return self._segments[i]

    def __repr__(self) -> str:
        return f"SegmentList(bases={self._bases!r})"

    @property
    def first_base(self) -> int:
        """Base offset of the oldest segment (IndexError when empty)."""
        return self._bases[0]

    def index_of(self, offset: int) -> int:
        """Index of the segment that would hold `offset` (-1 if below the first)."""
        return bisect.bisect_right(self._bases, offset) - 1

    def locate(self, offset: int) -> tuple[int, LogSegment, int | None]:
        """(index, segment, next base or None) of the segment holding `offset` (the first if below)."""
        bases = self._bases
        i = bisect.bisect_right(bases, offset) - 1
        if i < 0:
            i = 0
        return i, self._segments[i], bases[i + 1] if i + 1 < len(bases) else None

    def next_base(self, i: int) -> int | None:
        """Base offset of the segment after index `i`; None after the active segment."""
        return self._bases[i + 1] if i + 1 < len(self._bases) else None

    def end_offset(self, seg: LogSegment, log_end_offset: int) -> int:
        """Offset after the last one `seg` (a member) can hold: the next base, or the log end."""
        i = self._bases.index(seg.base_offset)
        return self._bases[i + 1] if i + 1 < len(self._bases) else log_end_offset

    def closed(self) -> list[tuple[LogSegment, int]]:
        """Every segment but the active one, oldest first, each with its end offset (the next base)."""
        bases = self._bases
        return [(s, bases[i + 1]) for i, s in enumerate(self._segments[:-1])]

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding `offset` (the first one if below it) and every later one."""
        return self._segments[max(0, self.index_of(offset)) :]

    def snapshot(self) -> list[LogSegment]:
        """A copy of the segments, oldest first (safe to read on another thread)."""
        return list(self._segments)

    def run_index(self, old: Sequence[LogSegment], end_offset: int) -> int | None:
        """Index of `old` if it is still a run of live closed segments followed by one at `end_offset`."""
        i = self._find_run(old, end_offset)
        if i is None or any(s.deleted for s in old):
            return None
        return i

    # ---- changing ------------------------------------------------------------------------------

    def reset(self, segments: Iterable[LogSegment]) -> list[LogSegment]:
        """Replace every segment (loading, truncating fully, closing); returns the previous ones."""
        new = list(segments)
        bases = [s.base_offset for s in new]
        if any(a >= b for a, b in itertools.pairwise(bases)):
            raise ValueError(f"segment bases not strictly increasing: {bases}")
        previous = self._segments
        self._segments, self._bases = new, bases
        self._set_active()
        return previous

    def roll(self, seg: LogSegment) -> None:
        """Append `seg` as the new active segment; its base must be above the current active one's."""
        if self._bases and seg.base_offset <= self._bases[-1]:
            raise ValueError(f"new segment base {seg.base_offset} not above {self._bases[-1]}")
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self.active = seg

    def replace_active(self, seg: LogSegment) -> LogSegment:
        """Put `seg` in place of the active segment (an empty one moving its base); returns the old one."""
        if len(self._bases) > 1 and seg.base_offset <= self._bases[-2]:
            raise ValueError(f"new active base {seg.base_offset} not above {self._bases[-2]}")
        old = self._segments[-1]
        self._segments[-1] = seg
        self._bases[-1] = seg.base_offset
        self.active = seg
        return old

    def replace_run(self, old: Sequence[LogSegment], new: LogSegment, end_offset: int) -> bool:
        """Log cleaner: put `new` (same base) in place of the run `old` of closed segments followed by one
        at `end_offset`; False if it is not there. The old segments may already be marked deleted (the
        swap renames them away before the new files take their names)."""
        i = self._find_run(old, end_offset)
        if i is None or new.base_offset != old[0].base_offset:
            return False
        self._segments[i : i + len(old)] = [new]
        self._bases[i : i + len(old)] = [new.base_offset]
        return True  # never the active segment: `active` stays

    def drop_first(self) -> LogSegment:
        """Remove the oldest segment (retention, log start); never the active one (ValueError)."""
        if len(self._segments) < 2:
            raise ValueError("only the active segment is left")
        self._bases.pop(0)
        return self._segments.pop(0)

    def truncate_after(self, offset: int) -> list[LogSegment]:
        """Remove the segments whose base is above `offset`, newest first, always keeping the oldest."""
        segs, bases = self._segments, self._bases
        removed: list[LogSegment] = []
        while len(segs) > 1 and bases[-1] > offset:
            bases.pop()
            removed.append(segs.pop())
        if removed:
            self.active = segs[-1]
        return removed

    def _find_run(self, old: Sequence[LogSegment], end_offset: int) -> int | None:
        if not old:
            return None
        segs = self._segments
        i = bisect.bisect_left(self._bases, old[0].base_offset)
        n = len(old)
        if i + n >= len(segs) or self._bases[i + n] != end_offset:
            return None
        if any(a is not b for a, b in zip(segs[i : i + n], old, strict=True)):
            return None
        return i

    def _set_active(self) -> None:
        if self._segments:
            self.active = self._segments[-1]
        elif hasattr(self, "active"):
            del self.active
