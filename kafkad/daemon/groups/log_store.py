"""The __consumer_offsets topic as the coordinator's store: append on write, replay at start.

A group's records go to partition `abs(hashCode(group_id)) % offsets.topic.num.partitions` as one
uncompressed v2 batch, appended through the partition as its leader (in standalone mode the high
watermark moves with the append, so a commit answered is a commit on disk in the page cache, like
Kafka with acks=all on one broker). The topic is created with cleanup.policy=compact the first time
the store is opened. `replay()` reads every partition from its log start and decodes the batches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from kafkad.clock import Clock
from kafkad.daemon.groups.config import OFFSETS_TOPIC
from kafkad.daemon.groups.records import partition_for
from kafkad.daemon.groups.store import KeyValue
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records import SimpleRecord, build_batch, iter_batches

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20


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
        batch = build_batch([SimpleRecord(k, v, timestamp=now) for k, v in records])
        part = self._partition(partition_for(group_id, self.num_partitions))
        part.append_as_leader(memoryview(bytearray(batch)), now_ms=now, required_acks=1)

    def replay(self) -> Iterator[KeyValue]:
        """Every record of every partition, oldest first (blocking reads; small on appliances)."""
        for index in range(self.num_partitions):
            part = self.replicas.get(OFFSETS_TOPIC, index)
            if part is None:
                continue
            yield from _replay_partition(part)


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
