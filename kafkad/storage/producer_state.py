"""Idempotent producer state (Kafka `ProducerStateManager` / `ProducerAppendInfo`).

Per producer id: its epoch and the metadata of its last 5 batches (first/last sequence, first/last
offset, max timestamp). On a client append (`validate`):
- a batch equal to one of the cached 5 (same epoch, same sequence range) is a duplicate: the log
  returns its original offsets and appends nothing;
- an epoch below the producer's -> INVALID_PRODUCER_EPOCH;
- a new epoch must start at sequence 0 (unless the producer is unknown);
- within an epoch the first sequence must follow the last (wrapping at Int.MAX) ->
  OUT_OF_ORDER_SEQUENCE_NUMBER otherwise;
- an unknown producer id is accepted at any sequence (Kafka 2.4+/KIP-360: its state may have been
  removed by retention or DeleteRecords).
Replicated batches are not validated, only recorded.

Snapshots `<20-digit offset>.snapshot` use Kafka's format (`ProducerSnapshot` v1), so the state at that
offset loads without reading the log::

    version i16 (1) | crc u32 (CRC-32C of the rest) | count i32 |
    count x (producerId i64, epoch i16, lastSequence i32, lastOffset i64, offsetDelta i32,
             timestamp i64, coordinatorEpoch i32, currentTxnFirstOffset i64)

Only the newest batch of each producer is in a snapshot (as in Kafka); a producer without batches (only
a marker since its epoch bump) is written with lastSequence/lastOffset -1, as Kafka does. After loading
the newest snapshot at or below the log end, the log replays batch headers (never records; a control
batch's marker record) from there.

Transactions (Kafka's ongoingTxns / unreplicatedTxns): a transactional batch of a producer with no
ongoing transaction opens one at its offset (`ongoing`, by first offset); a COMMIT/ABORT marker
(`record_marker`) completes it, which moves it to `unreplicated` until the high watermark passes the
marker. The first unstable offset is the lowest first offset of both; the last stable offset (LSO) is
min(it, HW). Snapshots carry an ongoing transaction as the producer's currentTxnFirstOffset, so a
reload knows it without reading back to its start.
Runs on the event loop; snapshot writes are small (one entry per producer) and not fsynced there.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, NoReturn

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.checkpoints import remove_quietly, write_atomic
from kafkad.storage.crc import crc32c
from kafkad.storage.records import BatchHeader
from kafkad.storage.records.batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, increment_sequence

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_INT32_MAX = 0x7FFFFFFF
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


_new_tuple = tuple.__new__


def _last_sequence(base_seq: int, last_delta: int) -> int:
    """BatchHeader.last_sequence from the two fields (increment_sequence's common case inline)."""
    if base_seq == NO_SEQUENCE:
        return NO_SEQUENCE
    if base_seq <= _INT32_MAX - last_delta:
        return base_seq + last_delta
    return increment_sequence(base_seq, last_delta)


def _epoch_error(pid: int, epoch: int, known: int) -> NoReturn:
    raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, f"producer {pid}: epoch {epoch} is older than {known}")


def _not_transactional(pid: int) -> NoReturn:
    raise KafkaError(
        ErrorCode.INVALID_TXN_STATE,
        f"producer {pid}: expected a transactional write, its transaction here is ongoing",
    )


def _decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class BatchMetadata(NamedTuple):
    """One of a producer's last 5 batches. A NamedTuple, not a frozen dataclass: one is built per
    idempotent append, and the frozen dataclass's __init__ cost about as much as the rest of the check."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1  # of its last marker (batches carry their own)
    markers: int = 0  # markers recorded since it was loaded (KIP-890's verification guard, produce handler)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def timestamp(self) -> int:
        """When it last wrote (a batch or a marker), for expiration and DescribeProducers."""
        return max(self.batches[-1].timestamp if self.batches else -1, self.last_timestamp)

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(directory: Path) -> list[tuple[int, Path]]:
    """(offset, path) of every snapshot file in `directory`, oldest first."""
    out = []
    try:
        # os.scandir, not Path.glob: this runs when every partition opens (clean start of 1,000s).
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                stem = name[: -len(SNAPSHOT_SUFFIX)]
                if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
                    out.append((int(stem), directory / name))
    except FileNotFoundError:
        return []  # as Path.glob of a missing directory
    return sorted(out)


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    body = bytearray()
    count = 0
    for entry in entries:
        if entry.batches:
            last = entry.batches[-1]
            seq, offset, delta = last.last_seq, last.last_offset, last.last_offset - last.first_offset
            ts = max(last.timestamp, entry.last_timestamp)
        elif entry.epoch != NO_PRODUCER_EPOCH:  # only markers since its epoch began
            seq, offset, delta, ts = NO_SEQUENCE, -1, 0, entry.last_timestamp
        else:
            continue
        body += _ENTRY.pack(
            entry.producer_id,
            entry.epoch,
            seq,
            offset,
            delta,
            ts,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
        count += 1
    rest = struct.pack(">i", count) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(rest)) + rest


def decode_snapshot(data: bytes) -> dict[int, ProducerEntry]:
    """Entries of a snapshot; KafkaError(CORRUPT_MESSAGE) on a bad version, CRC or length."""
    if len(data) < _HEAD.size:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "producer snapshot too short")
    version, crc, count = _HEAD.unpack_from(data)
    if (
        version != SNAPSHOT_VERSION
        or crc32c(data[6:]) != crc
        or len(data) != _HEAD.size + count * _ENTRY.size
    ):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "producer snapshot has a bad version, CRC or length")
    out: dict[int, ProducerEntry] = {}
    for pid, epoch, last_seq, last_offset, delta, ts, coord, txn in _ENTRY.iter_unpack(data[_HEAD.size :]):
        entry = ProducerEntry(pid, epoch, coordinator_epoch=coord, current_txn_first_offset=txn)
        if last_offset < 0 or last_seq < 0:  # Kafka's: no batch metadata, only the epoch and markers
            entry.last_timestamp = ts
            out[pid] = entry
            continue
        entry.batches.append(
            BatchMetadata(
                _decrement_sequence(last_seq, delta), last_seq, last_offset - delta, last_offset, ts
            )
        )
        out[pid] = entry
    return out


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: its first data offset, the marker's offset, and how it ended."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its ongoing transaction, in first-offset order
        self.ongoing: dict[int, int] = {}
        # completed transactions whose marker the HW has not passed yet (they still hold the LSO)
        self.unreplicated: list[CompletedTxn] = []

    # ---- append path ---------------------------------------------------------------------------

    def validate(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """Check the producer batches of one client append; the original metadata of a duplicate.

        Raises KafkaError(INVALID_PRODUCER_EPOCH | OUT_OF_ORDER_SEQUENCE_NUMBER). Mutates nothing.
        """
        pending: dict[int, tuple[int, int]] = {}  # pid -> (epoch, last seq) within this append
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                continue
            entry = self.producers.get(pid)
            if pid not in pending and entry is not None:
                duplicate = entry.find_duplicate(h)
                if duplicate is not None:
                    return duplicate
            known_epoch = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
            if (
                entry is not None
                and entry.current_txn_first_offset >= 0
                and not h.attributes & TRANSACTIONAL_FLAG
                and h.producer_epoch >= known_epoch
            ):
                _not_transactional(pid)
            epoch, last_seq = pending.get(pid, (known_epoch, entry.last_seq if entry else NO_SEQUENCE))
            if h.producer_epoch < epoch:
                _epoch_error(pid, h.producer_epoch, epoch)
            if h.producer_epoch != epoch:
                if h.base_sequence != 0 and epoch != NO_PRODUCER_EPOCH:
                    raise KafkaError(
                        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {pid}: new epoch {h.producer_epoch} starts at {h.base_sequence}, not 0",
                    )
            elif known_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, h.base_sequence):
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: sequence {h.base_sequence} after {last_seq} (epoch {epoch})",
                )
            pending[pid] = (h.producer_epoch, h.last_sequence)
        return None

    def check_batch(
        self, pid: int, epoch: int, base_seq: int, last_delta: int, attributes: int = 0
    ) -> BatchMetadata | None:
        """`validate` of a single batch from its header fields (PartitionLog's inline append path).

        Same rules and errors as `validate([header])`, without building a BatchHeader.
        """
        entry = self.producers.get(pid)
        if entry is None:
            if epoch < NO_PRODUCER_EPOCH:
                _epoch_error(pid, epoch, NO_PRODUCER_EPOCH)
            return None
        known = entry.epoch
        batches = entry.batches
        if epoch == known and batches:
            last_seq = _last_sequence(base_seq, last_delta)
            for meta in batches:
                if meta.first_seq == base_seq and meta.last_seq == last_seq:
                    return meta
        if epoch < known:
            _epoch_error(pid, epoch, known)
        if entry.current_txn_first_offset >= 0 and not attributes & TRANSACTIONAL_FLAG:
            _not_transactional(pid)
        if epoch != known:
            if base_seq != 0 and known != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: new epoch {epoch} starts at {base_seq}, not 0",
                )
        elif known != NO_PRODUCER_EPOCH:
            prev = batches[-1].last_seq if batches else NO_SEQUENCE
            if not (base_seq == prev + 1 or (base_seq == 0 and prev == _INT32_MAX)):  # _in_sequence
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: sequence {base_seq} after {prev} (epoch {known})",
                )
        return None

    def update(self, header: BatchHeader, base_offset: int, max_timestamp: int) -> None:
        """Record a batch that was appended at `base_offset` (any origin, also replay)."""
        if header.producer_id >= 0:
            self.record_batch(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.last_offset_delta,
                header.attributes,
                base_offset,
                max_timestamp,
            )

    def record_batch(
        self,
        pid: int,
        epoch: int,
        base_seq: int,
        last_delta: int,
        attributes: int,
        base_offset: int,
        max_timestamp: int,
    ) -> None:
        """`update` from the header fields of an appended batch of producer `pid` (>= 0)."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, epoch)
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        if attributes & CONTROL_FLAG:  # callers give markers to record_marker; this one is unreadable
            entry.current_txn_first_offset = -1
            self.ongoing.pop(pid, None)
            return
        if attributes & TRANSACTIONAL_FLAG and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = base_offset
            self.ongoing[pid] = base_offset
        entry.batches.append(
            _new_tuple(
                BatchMetadata,
                (
                    base_seq,
                    _last_sequence(base_seq, last_delta),
                    base_offset,
                    base_offset + last_delta,
                    max_timestamp,
                ),
            )
        )

    # ---- transactions --------------------------------------------------------------------------

    def check_marker(self, pid: int, epoch: int, coordinator_epoch: int) -> None:
        """Kafka's appendEndTxnMarker checks for a marker the coordinator writes: INVALID_PRODUCER_EPOCH
        for an older producer epoch, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch."""
        entry = self.producers.get(pid)
        if entry is None:
            return
        if epoch < entry.epoch:
            _epoch_error(pid, epoch, entry.epoch)
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"producer {pid}: coordinator epoch {coordinator_epoch} is older than {entry.coordinator_epoch}",
            )

    def record_marker(
        self, pid: int, epoch: int, coordinator_epoch: int, offset: int, aborted: bool, timestamp: int
    ) -> tuple[CompletedTxn | None, int]:
        """A marker of producer `pid` was appended at `offset`: the transaction it completed (None if
        the producer had no data here since its last marker) and the LSO right after it (the first
        offset of another ongoing transaction, else `offset` + 1: the AbortedTxn's lastStableOffset)."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, epoch)
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = timestamp
        entry.markers += 1
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(pid, entry.current_txn_first_offset, offset, aborted)
            self.unreplicated.append(completed)
        entry.current_txn_first_offset = -1
        self.ongoing.pop(pid, None)
        lso = next(iter(self.ongoing.values()), offset + 1)
        return completed, lso

    def marker_count(self, pid: int) -> int:
        """How many markers of `pid` this state has recorded: a Produce verified with the coordinator
        appends only if none came in meanwhile (else its transaction ended under it)."""
        entry = self.producers.get(pid)
        return -1 if entry is None else entry.markers

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction not yet completed and replicated, None if none."""
        unreplicated = self.unreplicated
        if unreplicated:
            unreplicated[:] = [t for t in unreplicated if t.last_offset >= high_watermark]
        first = next(iter(self.ongoing.values()), None)
        for t in unreplicated:
            if first is None or t.first_offset < first:
                first = t.first_offset
        return first

    def _rebuild_ongoing(self) -> None:
        txns = sorted(
            (e.current_txn_first_offset, pid)
            for pid, e in self.producers.items()
            if e.current_txn_first_offset >= 0
        )
        self.ongoing = {pid: first for first, pid in txns}
        self.unreplicated = []

    # ---- log changes ---------------------------------------------------------------------------

    def truncate_head(self, log_start_offset: int) -> None:
        """The log start moved: forget producers whose last batch is gone, and older snapshots."""
        gone = [pid for pid, e in self.producers.items() if 0 <= e.last_offset < log_start_offset]
        for pid in gone:
            del self.producers[pid]
            self.ongoing.pop(pid, None)
        self.unreplicated = [t for t in self.unreplicated if t.last_offset >= log_start_offset]
        self.delete_snapshots(lambda offset: offset < log_start_offset)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle longer than `expiration_ms` (producer.id.expiration.ms); their ids."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0
            and (e.batches or e.last_timestamp >= 0)
            and now_ms - e.timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return expired

    def delete_snapshots(self, predicate: Callable[[int], bool]) -> None:
        for offset, path in list_snapshots(self.directory):
            if predicate(offset):
                remove_quietly(path)

    def take_snapshot(self, offset: int, *, fsync: bool = False) -> Path:
        """Write `<offset>.snapshot` with the current state (the state after every offset < `offset`)."""
        path = snapshot_path(self.directory, offset)
        write_atomic(path, encode_snapshot(self.producers.values()), fsync=fsync)
        return path

    def load(self, log_start_offset: int, log_end_offset: int, at_most: int | None = None) -> int:
        """Load the newest valid snapshot in [log start, log end] (and <= `at_most` if given); returns
        the offset to replay from.

        Snapshots above the log end (truncated away) and unreadable ones are deleted.
        """
        self.producers = {}
        self._rebuild_ongoing()
        for offset, path in reversed(list_snapshots(self.directory)):
            if offset > log_end_offset:
                remove_quietly(path)
                continue
            if at_most is not None and offset > at_most:
                continue
            if offset < log_start_offset:
                break
            try:
                self.producers = decode_snapshot(path.read_bytes())
            except (KafkaError, OSError) as exc:
                log.warning("%s: dropping unreadable producer snapshot (%s)", path, exc)
                remove_quietly(path)
                continue
            self._rebuild_ongoing()
            return offset
        return log_start_offset

    def latest_snapshot_offset(self) -> int | None:
        snaps = list_snapshots(self.directory)
        return snaps[-1][0] if snaps else None

    def sequence_state(self, producer_id: int) -> tuple[int, int] | None:
        """(epoch, last sequence) of a producer, for tests and DescribeProducers."""
        entry = self.producers.get(producer_id)
        return None if entry is None else (entry.epoch, entry.last_seq)


def remove_all_snapshots(directory: Path) -> None:
    for _, path in list_snapshots(directory):
        os.unlink(path)
