"""The general append path of a PartitionLog (`append_batches`): what the inline path in
`PartitionLog.append` does not take; and a follower's append of replicated batches (`append_replicated`).

That is: several batches in one request, replicated batches (offsets and epochs kept as the leader
stamped them), LogAppendTime topics, control batches, and every batch the inline path's combined test
refused, for which this path raises the precise error. Validation goes through
`validate_client_batches` (a BatchHeader per batch), then the same limits, sequence checks, roll, stamp
and segment append as the inline path. Runs on the event loop.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage import log_txn
from kafkad.storage.crc import crc32c
from kafkad.storage.log_types import AppendOrigin, AppendResult
from kafkad.storage.records import patch_offset_and_epoch, set_log_append_time, validate_client_batches
from kafkad.storage.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    MIN_RECORD_SIZE,
    header_from,
)

_MAX_CODEC = 4  # zstd

if TYPE_CHECKING:
    from kafkad.storage.partition_log import PartitionLog


def append_replicated(log: PartitionLog, records: memoryview, now_ms: int) -> AppendResult:
    """A follower's append of the leader's batches, kept as the leader wrote them (offsets, epochs,
    producer ids): one pass over the batch headers (one unpack and one CRC each, no BatchHeader unless
    the batch has a producer id), the checks of append_batches for a replica, one segment write. Any
    batch this pass refuses sends the whole append through append_batches, which raises the precise
    error (its checks are a superset of these)."""
    end = len(records)
    cfg = log.config
    max_length = cfg.max_message_bytes - LOG_OVERHEAD
    unpack = HEADER_STRUCT.unpack_from
    prev_last = log.log_end_offset - 1
    first = -1
    max_ts, offset_of_max_ts = -1, 0
    epochs = log.leader_epoch_cache
    latest = epochs.latest_epoch
    new_epochs: list[tuple[int, int]] = []
    producers = []
    pos = 0
    while pos < end:
        if end - pos < BATCH_OVERHEAD or end > cfg.segment_bytes:
            return append_batches(log, records, -1, now_ms, AppendOrigin.REPLICATION)
        fields = unpack(records, pos)
        base, length, epoch, magic, crc, attributes, last_delta, _, ts, producer_id, _, _, count = fields
        size = length + LOG_OVERHEAD
        codec = attributes & COMPRESSION_MASK
        if (
            magic != MAGIC
            or size < BATCH_OVERHEAD
            or size > end - pos
            or length > max_length
            or count <= 0
            or count != last_delta + 1
            or codec > _MAX_CODEC
            or (codec == 0 and count * MIN_RECORD_SIZE > size - BATCH_OVERHEAD)
            or base <= prev_last
            or crc32c(records[pos + ATTRIBUTES_OFFSET : pos + size]) != crc
        ):
            return append_batches(log, records, -1, now_ms, AppendOrigin.REPLICATION)
        if first < 0:
            first = base
        if ts > max_ts:
            max_ts, offset_of_max_ts = ts, base
        if epoch > latest:
            new_epochs.append((epoch, base))
            latest = epoch
        if producer_id >= 0:
            producers.append((header_from(pos, fields), base))
        prev_last = base + last_delta
        pos += size
    if first < 0:  # no batch at all
        return append_batches(log, records, -1, now_ms, AppendOrigin.REPLICATION)
    log.maybe_roll(end, first, prev_last, now_ms, max_ts)
    log.active_segment.append(prev_last, max_ts, offset_of_max_ts if max_ts > -1 else first, records)
    for epoch, base in new_epochs:
        epochs.assign(epoch, base)
    if producers:
        for h, base in producers:
            log_txn.record_producer_batch(log, records, h, base, h.max_timestamp)
    log.log_end_offset = prev_last + 1
    return AppendResult(first, prev_last, -1, log.log_start_offset)


def append_batches(
    log: PartitionLog, records: memoryview, leader_epoch: int, now_ms: int, origin: AppendOrigin
) -> AppendResult:
    """The general append: any number of batches, idempotent producers, replicas, LogAppendTime."""
    replica = origin is AppendOrigin.REPLICATION
    headers = validate_client_batches(records, allow_control=origin is not AppendOrigin.CLIENT)
    cfg = log.config
    size = len(records)
    if size > cfg.segment_bytes:
        raise KafkaError(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"{size} bytes exceed segment.bytes {cfg.segment_bytes}",
        )
    append_time = cfg.log_append_time
    log_append = not replica and append_time
    diff = cfg.message_timestamp_difference_max_ms
    check_ts = not replica and not append_time and diff < 2**62
    max_message = cfg.max_message_bytes - LOG_OVERHEAD
    has_producer = False
    count = 0
    batch_max_ts: int | None = None
    for h in headers:
        if h.batch_length > max_message:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {h.size} bytes exceeds max.message.bytes {cfg.max_message_bytes}",
            )
        if (
            check_ts
            and not h.attributes & CONTROL_FLAG
            and (abs(h.max_timestamp - now_ms) > diff or abs(h.base_timestamp - now_ms) > diff)
        ):
            raise KafkaError(ErrorCode.INVALID_TIMESTAMP, f"timestamp out of range of {diff} ms")
        if h.producer_id >= 0:
            has_producer = True
        count += h.last_offset_delta + 1
        if batch_max_ts is None or h.max_timestamp > batch_max_ts:
            batch_max_ts = h.max_timestamp
    assert batch_max_ts is not None  # validate_client_batches never returns no headers
    producer_state = log.producer_state
    if has_producer and origin is AppendOrigin.CLIENT:
        duplicate = producer_state.validate(headers)
        if duplicate is not None:
            return AppendResult(duplicate.first_offset, duplicate.last_offset, -1, log.log_start_offset, True)
    if replica:
        first = headers[0].base_offset
        if first < log.log_end_offset:
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"replicated offset {first} below log end {log.log_end_offset}",
            )
        for prev, h in itertools.pairwise(headers):
            if h.base_offset <= prev.last_offset:
                raise KafkaError(ErrorCode.INVALID_RECORD, "replicated batches have non-increasing offsets")
        last_offset = headers[-1].last_offset
    else:
        first = log.log_end_offset
        last_offset = first + count - 1
    log.maybe_roll(size, first, last_offset, now_ms, batch_max_ts)
    epochs = log.leader_epoch_cache
    if len(headers) == 1 and not log_append:
        # The common case: one batch per partition per request.
        h = headers[0]
        if not replica:
            patch_offset_and_epoch(records, h.position, first, leader_epoch)
        ts = h.max_timestamp
        log.active_segment.append(last_offset, ts if ts > -1 else -1, first, records)
        epoch = h.partition_leader_epoch if replica else leader_epoch
        if epoch > epochs.latest_epoch:
            epochs.assign(epoch, first)
        if has_producer:
            log_txn.record_producer_batch(log, records, h, first, h.max_timestamp)
        log.log_end_offset = last_offset + 1
        return AppendResult(first, last_offset, -1, log.log_start_offset)
    # Stamp offsets (and LogAppendTime) in place; compute the append's max timestamp.
    max_ts, offset_of_max_ts = -1, first
    offset = first
    bases: list[int] = []
    for h in headers:
        if not replica:
            patch_offset_and_epoch(records, h.position, offset, leader_epoch)
            if log_append:
                set_log_append_time(records, h.position, now_ms)
        else:
            offset = h.base_offset
        bases.append(offset)
        ts = now_ms if log_append else h.max_timestamp
        if ts > max_ts:
            max_ts, offset_of_max_ts = ts, offset
        offset += h.last_offset_delta + 1
    log.active_segment.append(last_offset, max_ts, offset_of_max_ts, records)
    for h, base in zip(headers, bases, strict=True):
        epoch = h.partition_leader_epoch if replica else leader_epoch
        if epoch > epochs.latest_epoch:
            epochs.assign(epoch, base)
        if h.producer_id >= 0:
            log_txn.record_producer_batch(log, records, h, base, now_ms if log_append else h.max_timestamp)
    log.log_end_offset = last_offset + 1
    return AppendResult(first, last_offset, now_ms if log_append else -1, log.log_start_offset)
