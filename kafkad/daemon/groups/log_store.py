"""The __consumer_offsets topic as the coordinator's store: append on write, replay at start.

A group's records go to partition `abs(hashCode(group_id)) % offsets.topic.num.partitions` as one
uncompressed v2 batch, appended through the partition as its leader (in standalone mode the high
watermark moves with the append, so a commit answered is a commit on disk in the page cache, like
Kafka with acks=all on one broker). The topic is created with cleanup.policy=compact the first time
the store is opened. `replay()` reads every partition from its log start and decodes the batches.

The write path runs once per OffsetCommit request, so it is kept lean: the batch is encoded straight
into one bytearray (every record has the batch's timestamp, no headers: `_offsets_batch`), handed to
the partition without a copy, and the group's partition number is cached.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from crc32c import crc32c

from kafkad.clock import Clock
from kafkad.daemon.groups.config import OFFSETS_TOPIC
from kafkad.daemon.groups.records import partition_for
from kafkad.daemon.groups.store import KeyValue
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records import iter_batches
from kafkad.storage.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
)
from kafkad.storage.records.varint import encode_varint

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20
_UINT32 = struct.Struct(">I")
_PARTITION_CACHE_MAX = 65536


class PartitionLike(Protocol):
    @property
    def log(self) -> Any: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    def append_as_leader(self, records: memoryview, *, now_ms: int, required_acks: int) -> Any: ...


class ReplicasLike(Protocol):
    def has_topic(self, topic: str) -> bool: ...
    def create_topic(
        self, topic: str, num_partitions: int, overrides: Mapping[str, str] | None = None
    ) -> None: ...
    def get(self, topic: str, partition: int) -> Any: ...


class LogGroupStore:
    """Writes group records to __consumer_offsets; runs on the event loop (page-cache appends)."""

    def __init__(self, replicas: ReplicasLike, clock: Clock, num_partitions: int, segment_bytes: int) -> None:
        self.replicas = replicas
        self.clock = clock
        self.num_partitions = num_partitions
        self.segment_bytes = segment_bytes
        self._partition_of: dict[str, int] = {}  # group id -> partition (a Java string hash each)

    def ensure_topic(self) -> None:
        if self.replicas.has_topic(OFFSETS_TOPIC):
            return
        self.replicas.create_topic(
            OFFSETS_TOPIC,
            self.num_partitions,
            {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes)},
        )
        log.info("created %s with %d partitions", OFFSETS_TOPIC, self.num_partitions)

    def _partition(self, index: int) -> PartitionLike:
        part: PartitionLike | None = self.replicas.get(OFFSETS_TOPIC, index)
        if part is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC}-{index} is not available")
        return part

    def write(self, group_id: str, records: Sequence[KeyValue]) -> None:
        if not records:
            return
        now = self.clock.time_ms()
        index = self._partition_of.get(group_id)
        if index is None:
            if len(self._partition_of) >= _PARTITION_CACHE_MAX:
                self._partition_of.clear()
            index = self._partition_of[group_id] = partition_for(group_id, self.num_partitions)
        part = self._partition(index)
        part.append_as_leader(memoryview(_offsets_batch(records, now)), now_ms=now, required_acks=1)

    def replay(self) -> Iterator[KeyValue]:
        """Every record of every partition, oldest first (blocking reads; small on appliances)."""
        for index in range(self.num_partitions):
            part = self.replicas.get(OFFSETS_TOPIC, index)
            if part is None:
                continue
            yield from _replay_partition(part)


_NULL_VALUE = encode_varint(-1)
_RECORD_HEAD = b"\x00\x00"  # attributes 0, timestamp delta 0 (every record has the batch timestamp)
_NO_HEADERS = b"\x00"


def _offsets_batch(records: Sequence[KeyValue], timestamp: int) -> bytearray:
    """One uncompressed v2 batch of `records` (what storage's build_batch would make of
    SimpleRecord(k, v, timestamp=timestamp) each, without the per-record objects)."""
    parts: list[bytes] = []
    for delta, (key, value) in enumerate(records):
        body = [_RECORD_HEAD, encode_varint(delta), encode_varint(len(key)), key]
        if value is None:
            body.append(_NULL_VALUE)
        else:
            body += (encode_varint(len(value)), value)
        body.append(_NO_HEADERS)
        raw = b"".join(body)
        parts += (encode_varint(len(raw)), raw)
    head = bytearray(BATCH_OVERHEAD)
    head += b"".join(parts)
    n = len(records)
    HEADER_STRUCT.pack_into(
        head, 0, 0, len(head) - LOG_OVERHEAD, -1, MAGIC, 0, 0, n - 1, timestamp, timestamp, -1, -1, -1, n
    )
    _UINT32.pack_into(head, CRC_OFFSET, crc32c(memoryview(head)[ATTRIBUTES_OFFSET:]))
    return head


def _replay_partition(part: PartitionLike) -> Iterator[KeyValue]:
    offset = part.log_start_offset
    end = part.log_end_offset
    while offset < end:
        result = part.log.read(offset, _READ_CHUNK, max_offset=end, min_one_batch=True)
        if not result.slices:
            break
        data = b"".join(s.read() for s in result.slices)
        last = offset - 1
        for batch in iter_batches(data, verify_crc=False):
            last = batch.header.last_offset
            if batch.header.is_control:
                continue
            for rec in batch.records:
                if rec.offset >= offset and rec.key is not None:
                    yield rec.key, rec.value
        if last < offset:
            break  # no complete batch in the slice: a torn tail
        offset = last + 1
