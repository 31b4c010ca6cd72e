"""The __consumer_offsets topic as the coordinator's store: append on write, replay at start.

A group's records go to partition `abs(hashCode(group_id)) % offsets.topic.num.partitions` as one
uncompressed v2 batch, appended through the partition as its leader (in standalone mode the high
watermark moves with the append, so a commit answered is a commit on disk in the page cache, like
Kafka with acks=all on one broker). `replay()` reads every partition from its log start and decodes
the batches.

The topic is created lazily, as Kafka does: `ensure_topic()` (awaited by FindCoordinator, JoinGroup
and OffsetCommit) creates it with cleanup.policy=compact one partition at a time, yielding to the loop
between partitions, since each costs a mkdir and an fsync'd override file (50 partitions are 0.1 s to
seconds of blocking I/O on slow flash). Concurrent callers await the same creation; `ready` turns true
only once every partition exists, and until then Metadata hides the partial topic. A creation torn by
a crash leaves empty partitions 0..k-1: the next start sees them all empty and completes the topic.

The write path runs once per OffsetCommit request, so it is kept lean: the batch is encoded straight
into one bytearray (every record has the batch's timestamp, no headers: `_offsets_batch`), handed to
the partition without a copy, and the group's partition number is cached. The usual commit is one
record whose key repeats commit after commit with a value of the same size: its batch is a copy of
the key's last batch with the value, the two header timestamps and the CRC written over
(`_one_record_batch`), no varint or record encoding at all.

A TxnOffsetCommit is a transactional batch of its producer (id, epoch; attributes' transactional bit),
so the partition's producer state fences an older epoch and holds the last stable offset until the
marker. Its base sequence continues the producer's last one in the partition: Kafka appends it with
AppendOrigin.COORDINATOR, which skips the sequence check, and continuing the sequence passes the check
of a log that makes it (a repeated sequence would be taken for a retried duplicate and dropped).
`replay()` yields those records as store.TxnRecord and each marker as store.TxnEnd.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from kafkad.clock import Clock
from kafkad.coordinator.group.config import OFFSETS_TOPIC
from kafkad.coordinator.group.records import partition_for
from kafkad.coordinator.group.store import KeyValue, Producer, Replayed, TxnEnd, TxnRecord
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.crc import crc32c
from kafkad.storage.records import decode_batch, iter_headers
from kafkad.storage.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    TRANSACTIONAL_FLAG,
)
from kafkad.storage.records.varint import encode_varint

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20
_UINT32 = struct.Struct(">I")
_MARKER_TYPE = struct.Struct(">h")
_TIMESTAMPS = struct.Struct(">qq")  # firstTimestamp, maxTimestamp
_FIRST_TIMESTAMP_OFFSET = 27
_PARTITION_CACHE_MAX = 65536
# One template batch per offset key (group, topic, partition): ~200 bytes each. Dropped wholesale when
# full, which only costs re-encoding.
_TEMPLATE_CACHE_MAX = 16384
# Only small values get a template: offset commits (tens of bytes). Group metadata carries every member's
# assignment and changes size on each rebalance; caching it would hold a copy per group for no gain.
_TEMPLATE_VALUE_MAX = 256


class PartitionLike(Protocol):
    @property
    def log(self) -> Any: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def is_leader(self) -> bool: ...
    def append_as_leader(self, records: memoryview, *, now_ms: int, required_acks: int) -> Any: ...


class ReplicasLike(Protocol):
    def has_topic(self, topic: str) -> bool: ...
    def create_topic(
        self, topic: str, num_partitions: int, overrides: Mapping[str, str] | None = None
    ) -> None: ...
    def get(self, topic: str, partition: int) -> Any: ...
    def is_offline(self, topic: str, partition: int) -> bool: ...
    def add_partitions(self, topic: str, new_total: int) -> None: ...


def _partition_count(replicas: ReplicasLike) -> int:
    """Partitions 0..n-1 of the offsets topic that exist (creation goes in index order)."""
    n = 0
    while replicas.get(OFFSETS_TOPIC, n) is not None or replicas.is_offline(OFFSETS_TOPIC, n):
        n += 1  # an offline partition (its files failed) still exists: the group hash must not change
    return n


class LogGroupStore:
    """Writes group records to __consumer_offsets; runs on the event loop (page-cache appends).

    `num_partitions` is what the group hash uses: the configured count, or the count of an existing
    topic that holds data (the hash must match where the data is).
    """

    def __init__(
        self,
        replicas: ReplicasLike,
        clock: Clock,
        num_partitions: int,
        segment_bytes: int,
        *,
        cluster: bool = False,
    ) -> None:
        self.replicas = replicas
        self.clock = clock
        self.segment_bytes = segment_bytes
        self._partition_of: dict[str, int] = {}  # group id -> partition (a Java string hash each)
        # record key -> (its last one-record batch, that batch's value size)
        self._templates: dict[bytes, tuple[bytes, int]] = {}
        self._creating: asyncio.Future[None] | None = None
        # Cluster mode appends as Kafka's offsets.commit.required.acks=-1: the ISR is checked against
        # min.insync.replicas before the append (NOT_ENOUGH_REPLICAS: nothing written); the callers wait
        # for the HW (ownership.commit_replicated). Standalone (ISR = {self}) appends as acks=1.
        self._required_acks = -1 if cluster else 1
        if cluster:  # the controller creates the topic (cluster/metadata.py); never created here
            self.num_partitions = num_partitions
            self.ready = True
            return
        existing = _partition_count(replicas)
        if existing and existing != num_partitions and not self._all_empty(existing):
            log.warning(
                "%s has %d partitions, not offsets.topic.num.partitions=%d: using %d",
                OFFSETS_TOPIC,
                existing,
                num_partitions,
                existing,
            )
            num_partitions = existing
        self.num_partitions = num_partitions
        self.ready = existing >= num_partitions

    def _all_empty(self, count: int) -> bool:
        parts = [self.replicas.get(OFFSETS_TOPIC, i) for i in range(count)]
        return all(p is not None and p.log_end_offset == 0 for p in parts)  # offline: may hold data

    async def ensure_topic(self) -> None:
        """Create the topic unless it is complete; raises KafkaError(COORDINATOR_NOT_AVAILABLE)."""
        if self.ready:
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.ensure_future(self._create())
        try:
            # shield: a cancelled waiter (its connection closed) must not stop the creation others await
            await asyncio.shield(self._creating)
        except Exception as exc:  # disk full, a concurrent delete: the client retries later
            log.warning("creating %s failed: %s", OFFSETS_TOPIC, exc)
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create {OFFSETS_TOPIC}") from exc

    def close(self) -> None:
        """Stop a creation in progress (broker shutdown: the logs are about to close)."""
        if self._creating is not None and not self._creating.done():
            self._creating.cancel()

    async def _create(self) -> None:
        have = _partition_count(self.replicas)
        started = have
        if have == 0:
            self.replicas.create_topic(
                OFFSETS_TOPIC,
                1,
                {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes)},
            )
            have = 1
        while have < self.num_partitions:
            await asyncio.sleep(0)  # other connections run between two partitions' filesystem work
            have = _partition_count(self.replicas)  # from where it is (a concurrent admin change)
            if have == 0:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} was deleted")
            if have < self.num_partitions:
                self.replicas.add_partitions(OFFSETS_TOPIC, have + 1)
                have += 1
        self.ready = True
        if started:
            log.info("completed %s: partitions %d..%d added", OFFSETS_TOPIC, started, have - 1)
        else:
            log.info("created %s with %d partitions", OFFSETS_TOPIC, have)

    def _partition(self, index: int) -> PartitionLike:
        part: PartitionLike | None = self.replicas.get(OFFSETS_TOPIC, index)
        if part is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC}-{index} is not available")
        return part

    def write(
        self,
        group_id: str,
        records: Sequence[KeyValue],
        *,
        cleanup: bool = False,
        producer: Producer | None = None,
    ) -> None:
        if not records:
            return
        now = self.clock.time_ms()
        index = self._partition_of.get(group_id)
        if index is None:
            if len(self._partition_of) >= _PARTITION_CACHE_MAX:
                self._partition_of.clear()
            index = self._partition_of[group_id] = partition_for(group_id, self.num_partitions)
        part = self._partition(index)
        if producer is not None:
            seq = _next_sequence(part, producer)
            batch = _offsets_batch(records, now, producer, seq)
        elif len(records) == 1 and records[0][1] is not None:
            batch = self._one_record_batch(records[0][0], records[0][1], now)
        else:
            batch = _offsets_batch(records, now)
        acks = 1 if cleanup else self._required_acks  # Kafka's cleanupGroupMetadata appends with acks=1
        part.append_as_leader(memoryview(batch), now_ms=now, required_acks=acks)

    def _one_record_batch(self, key: bytes, value: bytes, timestamp: int) -> bytearray:
        """_offsets_batch(((key, value),), timestamp), from the key's template when the value size
        matches: the record ends in the value then a zero header count, so the value's place is known."""
        cached = self._templates.get(key)
        if cached is None or cached[1] != len(value):
            batch = _offsets_batch(((key, value),), timestamp)
            if len(value) > _TEMPLATE_VALUE_MAX:
                return batch
            if len(self._templates) >= _TEMPLATE_CACHE_MAX:
                self._templates.clear()
            self._templates[key] = (bytes(batch), len(value))
            return batch
        buf = bytearray(cached[0])
        end = len(buf) - 1
        buf[end - len(value) : end] = value
        _TIMESTAMPS.pack_into(buf, _FIRST_TIMESTAMP_OFFSET, timestamp, timestamp)
        _UINT32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
        return buf

    def log_ends(self) -> dict[int, int]:
        """The log end offset of every partition this broker leads (where a replay stops)."""
        ends = {}
        for index in range(self.num_partitions):
            part = self.replicas.get(OFFSETS_TOPIC, index)
            if part is not None and part.is_leader:
                ends[index] = part.log_end_offset
        return ends

    def replay(
        self, *, upto: Mapping[int, int] | None = None, since: Mapping[int, int] | None = None
    ) -> Iterator[Replayed]:
        """Every record of every partition, oldest first (blocking reads; small on appliances); `upto`
        stops each partition at that offset (the replay in the executor), `since` starts it there (the
        tail appended meanwhile, read on the loop, so no marker lands between the two unseen)."""
        for index in range(self.num_partitions):
            part = self.replicas.get(OFFSETS_TOPIC, index)
            if part is None or not part.is_leader:  # cluster mode: groups/ownership.py loads on election
                continue
            start = None if since is None else since.get(index)
            yield from replay_partition(part, start=start, end=None if upto is None else upto.get(index))


_RECORD_HEAD = b"\x00\x00"  # attributes 0, timestamp delta 0 (every record has the batch timestamp)
_NULL_VALUE_NO_HEADERS = encode_varint(-1) + b"\x00"
# Zig-zag varints of the small non-negative ints a record needs (lengths, deltas): a lookup, not a
# call. 1,024 entries (~40 KB) cover the records of commits with short metadata.
_VARINTS = tuple(encode_varint(i) for i in range(1 << 10))


def _varint(n: int) -> bytes:
    return _VARINTS[n] if n < 1024 else encode_varint(n)


def _next_sequence(part: PartitionLike, producer: Producer) -> int:
    """The base sequence continuing `producer`'s last batch in the partition (0 in a new epoch)."""
    entry = getattr(getattr(part.log, "producer_state", None), "producers", {}).get(producer.producer_id)
    if entry is None or entry.epoch != producer.producer_epoch or not entry.batches:
        return 0
    last: int = entry.batches[-1].last_seq
    return 0 if last >= 0x7FFFFFFF else last + 1


def _offsets_batch(
    records: Sequence[KeyValue], timestamp: int, producer: Producer | None = None, base_sequence: int = -1
) -> bytearray:
    """One uncompressed v2 batch of `records` (what storage's build_batch would make of
    SimpleRecord(k, v, timestamp=timestamp) each, without the per-record objects); with `producer`,
    a transactional batch of that producer starting at `base_sequence`."""
    buf = bytearray(BATCH_OVERHEAD)
    for delta, (key, value) in enumerate(records):
        head = _RECORD_HEAD + _varint(delta) + _varint(len(key))
        if value is None:
            buf += _varint(len(head) + len(key) + 2)
            buf += head
            buf += key
            buf += _NULL_VALUE_NO_HEADERS
        else:
            value_len = _varint(len(value))
            buf += _varint(len(head) + len(key) + len(value_len) + len(value) + 1)
            buf += head
            buf += key
            buf += value_len
            buf += value
            buf += b"\x00"  # no headers
    n = len(records)
    attributes, pid, epoch = 0, -1, -1
    if producer is not None:
        attributes, pid, epoch = TRANSACTIONAL_FLAG, producer.producer_id, producer.producer_epoch
    HEADER_STRUCT.pack_into(
        buf, 0, 0, len(buf) - LOG_OVERHEAD, -1, MAGIC, 0, attributes, n - 1, timestamp, timestamp,
        pid, epoch, base_sequence, n,
    )  # fmt: skip
    _UINT32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return buf


def replay_partition(
    part: PartitionLike, *, start: int | None = None, end: int | None = None
) -> Iterator[Replayed]:
    """Every record of one partition from `start` (its log start) to `end` (its log end), oldest first
    (blocking reads): plain records as (key, value), transactional ones as TxnRecord, markers as TxnEnd."""
    offset = part.log_start_offset if start is None else max(start, part.log_start_offset)
    end = part.log_end_offset if end is None else end
    while offset < end:
        result = part.log.read(offset, _READ_CHUNK, max_offset=end, min_one_batch=True)
        if not result.slices:
            break
        data = b"".join(s.read() for s in result.slices)
        last = offset - 1
        for header in iter_headers(data):
            if header.base_offset >= end:
                break  # past where this replay stops (the tail replay reads on from there)
            last = header.last_offset
            if header.is_control:
                end_txn = _marker(data, header)
                if end_txn is not None and header.base_offset >= offset:
                    yield end_txn
                continue
            try:  # decompression is bounded (codecs.MAX_DECOMPRESSED_BYTES): a bomb raises
                records = decode_batch(data, header.position).records
            except KafkaError as exc:
                log.warning(
                    "%s: batch at offsets %d-%d cannot be decoded, skipped: %s",
                    OFFSETS_TOPIC,
                    header.base_offset,
                    last,
                    exc,
                )
                continue
            txn = header.is_transactional
            for rec in records:
                if rec.offset >= offset and rec.key is not None:
                    yield TxnRecord(rec.key, rec.value, header.producer_id) if txn else (rec.key, rec.value)
        if last < offset:
            break  # no complete batch in the slice: a torn tail
        offset = last + 1


def _marker(data: bytes, header: Any) -> TxnEnd | None:
    """The transaction marker of a control batch (key: version int16, type int16: 0 ABORT, 1 COMMIT)."""
    try:
        (rec,) = decode_batch(data, header.position).records
        key = rec.key
        if key is None or len(key) < 4:
            return None
        kind = _MARKER_TYPE.unpack_from(key, 2)[0]
    except (KafkaError, ValueError, struct.error) as exc:
        log.warning("%s: control batch at %d unreadable, skipped: %s", OFFSETS_TOPIC, header.base_offset, exc)
        return None
    return TxnEnd(header.producer_id, kind == 1) if kind in (0, 1) else None
