"""Leader epoch cache (Kafka `LeaderEpochFileCache`) backed by the `leader-epoch-checkpoint` file.

An ordered list of (epoch, start_offset): the first offset written under each leader epoch. The log
assigns a new entry when an appended batch carries a higher epoch; followers ask the leader for the
end offset of an epoch (OffsetForLeaderEpoch) to find where their logs diverge.

Every change rewrites the checkpoint atomically (temp -> rename) without fsync on the event loop;
`flush()` (blocking) makes it durable. After an unclean shutdown the log rebuilds the cache from the
batch headers of the recovered segments, so a lost update is repaired. A LeaderAndIsr making this
broker leader of many partitions defers their writes (`writes_deferred_to`) and has them done on a
thread (`write_if_changed`): each is a file create and rename (~1 ms on a busy ext4), 1,000 of them
held the loop for seconds. Not durable either way, so recovery already copes with a write that never
happened; a per-cache lock orders the writes so the newest entries always land last.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kafkad.storage.checkpoints import read_epochs, write_epochs

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
CHECKPOINT_FILE = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, path: Path | None, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._entries: list[tuple[int, int]] = list(entries or [])
        self._deferring = False
        self._pending: list[LeaderEpochCache] | None = None  # writes_deferred_to's list
        self._lock = threading.Lock()  # one writer of the file at a time (loop, deferred writer, flush)
        self._written: list[tuple[int, int]] | None = None  # what the file holds (None: not known)

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache:
        """Blocking: read `leader-epoch-checkpoint` of a partition directory ([] if absent)."""
        path = directory / CHECKPOINT_FILE
        cache = cls(path, read_epochs(path))
        cache._written = cache.entries
        return cache

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` if it is new; returns whether anything changed."""
        if epoch < 0:
            return False
        if self._entries:
            last_epoch, last_start = self._entries[-1]
            if last_epoch == epoch and start_offset >= last_start:
                return False
        # Kafka drops entries the new one contradicts (a higher/equal epoch or a later start offset).
        kept = [(e, o) for e, o in self._entries if e < epoch and o < start_offset]
        if len(kept) != len(self._entries):
            log.info(
                "%s: epoch %d at %d replaces %s", self.path, epoch, start_offset, self._entries[len(kept) :]
            )
        self._entries = [*kept, (epoch, start_offset)]
        self._write()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's `endOffsetFor`: the start offset of the first higher epoch.

        The latest epoch ends at the log end offset; an epoch above the latest is (-1, -1); an epoch
        below the first answers the first epoch's start with the requested epoch.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        higher = next(((e, o) for e, o in self._entries if e > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = None
        for e, o in self._entries:
            if e <= requested_epoch:
                floor = (e, o)
        if floor is None:
            return requested_epoch, higher[1]
        return floor[0], higher[1]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch an offset was written in (-1 if before the first entry)."""
        epoch = UNDEFINED_EPOCH
        for e, o in self._entries:
            if o > offset:
                break
            epoch = e
        return epoch

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (log truncation)."""
        kept = [(e, o) for e, o in self._entries if o < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved: drop epochs wholly below it, move the one that spans it to `start_offset`."""
        below = [(e, o) for e, o in self._entries if o <= start_offset]
        if not below:
            return
        above = self._entries[len(below) :]
        last_epoch, last_start = below[-1]
        new = [(last_epoch, max(last_start, start_offset)), *above]
        if new != self._entries:
            self._entries = new
            self._write()

    def clear(self) -> None:
        self._entries = []
        self._write()

    @contextmanager
    def deferred_writes(self) -> Iterator[None]:
        """Blocking at exit: changes inside the block rewrite the checkpoint once at the end, and only
        if the entries differ (log recovery replays one assign per epoch change of every batch)."""
        before, self._deferring = list(self._entries), True
        try:
            yield
        finally:
            self._deferring = False
            if self._entries != before:
                self._write()

    @contextmanager
    def writes_deferred_to(self, pending: list[LeaderEpochCache]) -> Iterator[None]:
        """Changes inside the block write nothing; a changed cache joins `pending`, for the caller to
        have `write_if_changed` done off the event loop."""
        self._pending = pending
        try:
            yield
        finally:
            self._pending = None

    def _write(self) -> None:
        if self.path is None or self._deferring:
            return
        if self._pending is not None:
            self._pending.append(self)
            return
        self._write_entries(fsync=False, only_if_changed=False)

    def write_if_changed(self) -> None:
        """Blocking (any thread): write the checkpoint unless it already holds the current entries."""
        if self.path is not None:
            self._write_entries(fsync=False, only_if_changed=True)

    def flush(self) -> None:
        """Blocking: rewrite the checkpoint with fsync."""
        if self.path is not None:
            self._write_entries(fsync=True, only_if_changed=False)

    def _write_entries(self, *, fsync: bool, only_if_changed: bool) -> None:
        assert self.path is not None
        with self._lock:  # the entries read under the lock: whoever writes last writes the newest
            entries = self._entries  # replaced, never mutated in place
            if only_if_changed and entries == self._written:
                return
            write_epochs(self.path, entries, fsync=fsync)
            self._written = entries
