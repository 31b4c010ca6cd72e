"""Where the shipper keeps its shipped position: an OFFSET per partition, behind a small protocol.

The shipped position of a partition is the next offset to ship: every record below it has landed.
It is an offset, not a segment name, so a shipper whose segment files start elsewhere (a new leader
in a cluster) continues exactly where the last one stopped: it ships from the first batch whose last
offset reaches the position. The same positions answer the retention / disk-budget gate (a closed
segment may go once its end, the next segment's base offset, is at or below the position).

`LocalPositionStore` (standalone) keeps them in `bridge-shipped-offsets` in the first log dir
(Kafka's offset-checkpoint format, `topic partition next-offset`, temp + fsync + rename). A log dir
shipped by an older kafkad holds `bridge-shipped-checkpoint` instead (`topic partition
last-shipped-base-offset`); `adopt_legacy` turns each mark into the base offset of the segment that
followed it, exactly (the shipper calls it with the partition's segment bases on its first pass), and
the old file is removed once the new one is written.

`zk_position.ZkPositionStore` (cluster mode) keeps one znode per partition (conditional writes
fenced by the leader epoch) and answers `may_ship` with "this broker leads the partition".
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from kafkad.storage.checkpoints import read_offsets, remove_quietly, write_offsets

log = logging.getLogger(__name__)

POSITIONS_FILE = "bridge-shipped-offsets"
LEGACY_CHECKPOINT_FILE = "bridge-shipped-checkpoint"

TopicPartition = tuple[str, int]


class ShippedPositionStore(Protocol):
    def refresh(self, topic: str, partition: int) -> None:
        """Blocking: re-read the partition's position from where it is kept (once per shipper pass)."""
        ...

    def position(self, topic: str, partition: int) -> int | None:
        """Cheap, any thread (the retention gate asks on the event loop): the next offset to ship
        (everything below has landed), as last read or written; None if nothing shipped."""
        ...

    def advance(self, topic: str, partition: int, next_offset: int) -> bool:
        """Blocking, durable: raise the position (never lowers it). False when fenced: another shipper
        owns the partition now (this one must stop shipping it)."""
        ...

    def may_ship(self, topic: str, partition: int) -> bool:
        """Whether this broker ships the partition (standalone: always; a cluster: its leader only)."""
        ...


class LocalPositionStore:
    """Standalone: positions in one checkpoint file, rewritten atomically on every advance."""

    def __init__(
        self, path: str | os.PathLike[str], legacy_path: str | os.PathLike[str] | None = None
    ) -> None:
        self._path = Path(path)
        self._legacy_path = Path(legacy_path) if legacy_path is not None else None
        self._lock = threading.Lock()
        self._positions: dict[TopicPartition, int] = read_offsets(self._path)
        self._legacy: dict[TopicPartition, int] = {}
        if self._legacy_path is not None and not self._path.exists():
            self._legacy = read_offsets(self._legacy_path)

    @classmethod
    def in_dir(cls, log_dir: str | os.PathLike[str]) -> LocalPositionStore:
        d = Path(log_dir)
        return cls(d / POSITIONS_FILE, d / LEGACY_CHECKPOINT_FILE)

    @property
    def path(self) -> Path:
        return self._path

    def refresh(self, topic: str, partition: int) -> None:
        """Nothing to do: this store is the only writer of its file."""

    def position(self, topic: str, partition: int) -> int | None:
        with self._lock:
            return self._positions.get((topic, partition))

    def snapshot(self) -> dict[TopicPartition, int]:
        with self._lock:
            return dict(self._positions)

    def advance(self, topic: str, partition: int, next_offset: int) -> bool:
        with self._lock:
            key = (topic, partition)
            if self._positions.get(key, -1) >= next_offset:
                return True
            self._positions[key] = next_offset
            snapshot = dict(self._positions)
        write_offsets(self._path, snapshot)
        return True

    def may_ship(self, topic: str, partition: int) -> bool:
        return True

    @property
    def has_legacy(self) -> bool:
        return bool(self._legacy)

    def adopt_legacy(self, segment_bases: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Convert the old per-segment marks: last shipped base B -> base of the next local segment.

        `segment_bases`: every local segment's base offset per partition (sorted, active included).
        A partition without a segment past B resumes at B + 1 (only B's own first record is trusted).
        """
        if not self._legacy:
            return
        with self._lock:
            for key, mark in self._legacy.items():
                bases = list(segment_bases.get(key, ()))
                i = bisect.bisect_right(bases, mark)
                converted = bases[i] if i < len(bases) else mark + 1
                self._positions[key] = max(self._positions.get(key, -1), converted)
                log.info("bridge: shipped mark %s-%d@%d (old format) is offset %d now", *key, mark, converted)
            snapshot = dict(self._positions)
            self._legacy = {}
        write_offsets(self._path, snapshot)
        if self._legacy_path is not None:
            remove_quietly(self._legacy_path)
