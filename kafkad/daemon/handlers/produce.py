"""Produce (0) v3-8 (v0-2 advertised for old librdkafka's codec gating, answered UNSUPPORTED_VERSION).

Per partition: find the leader Partition, check the disk budget, reject zstd below v7, append (storage
validates CRC/size/sequence and patches offsets in place), then for acks=-1 wait for the high watermark
within timeout_ms. acks=0 gets no response at all.

A compacted topic (cleanup.policy contains "compact") refuses records without a key, as Kafka's
LogValidator does: the partition answers INVALID_RECORD with one record_errors entry per keyless record
(v8+) and nothing of it is appended. Only these partitions have their records walked (key_check.py);
every other topic's batches are never decoded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from kafkad.daemon.handlers import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.storage.records import Compression, read_header, validate_client_batches
from kafkad.storage.records.key_check import null_key_indexes

log = logging.getLogger(__name__)


def _partition_response(
    index: int,
    code: ErrorCode,
    message: str | None = None,
    record_errors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": int(code),
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": record_errors or [],
        "error_message": message,
    }


# record_errors listed per refused partition: Kafka lists every keyless record, but a 1 MB batch of tiny
# records would answer with ~10 MB of identical messages; error_message still gives the total.
MAX_RECORD_ERRORS = 1000


def _keyless_response(topic: str, index: int, view: memoryview) -> dict[str, Any] | None:
    """Kafka's validateKey for a compacted topic: the INVALID_RECORD response if a record has no key.

    Batches are checked in order and the first batch with keyless records fails the partition, as in
    Kafka (which stops at its first failing batch). batch_index is the record's index in the partition's
    record set: Kafka's index within the batch, since clients send one batch per partition.
    """
    # Header and CRC first (Kafka validates the batch before its records); append re-checks them,
    # a few us per batch paid only by compacted topics.
    first = 0
    for header in validate_client_batches(view):
        missing = null_key_indexes(view, header.position)
        if missing:
            text = f"Compacted topic cannot accept message without key in topic partition {topic}-{index}."
            errors = [
                {"batch_index": first + i, "batch_index_error_message": text}
                for i in missing[:MAX_RECORD_ERRORS]
            ]
            # Kafka's RecordValidationException wording (LogValidator.processRecordErrors).
            shown = ", ".join(
                f"RecordError(batchIndex={e['batch_index']}, message='{text}')" for e in errors[:3]
            )
            message = (
                f"One or more records have been rejected due to {len(missing)} record errors in total, "
                f"and only showing the first three errors at most: [{shown}]"
            )
            log.debug("produce to %s-%d refused: %s", topic, index, message)
            return _partition_response(index, ErrorCode.INVALID_RECORD, message, errors)
        first += header.records_count
    return None


def _all_failed(request: Request, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "responses": [
            {
                "name": t["name"],
                "partition_responses": [
                    _partition_response(p["index"], code, message) for p in t["partition_data"]
                ],
            }
            for t in request.body.get("topic_data") or []
        ],
        "throttle_time_ms": 0,
    }


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return _all_failed(request, code)


def _check_compression(records: memoryview, version: int) -> None:
    if version >= 7:
        return
    pos = 0
    while pos + 61 <= len(records):
        h = read_header(records, pos)
        if h.compression is Compression.ZSTD:
            raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later")
        pos += h.size


async def _append(
    ctx: RequestContext, topic: str, index: int, records: Any, acks: int, timeout_ms: int
) -> dict[str, Any]:
    broker = ctx.broker
    try:
        if records is None or len(records) == 0:
            raise KafkaError(ErrorCode.INVALID_RECORD, "no records")
        part = broker.replicas.get_or_raise(topic, index)
        view = records if isinstance(records, memoryview) else memoryview(bytearray(records))
        _check_compression(view, ctx.version)
        broker.replicas.check_writable()
        if "compact" in part.log.config.cleanup_policy:
            refused = _keyless_response(topic, index, view)
            if refused is not None:
                _failed(broker, topic)
                return refused
        result = part.append_as_leader(view, now_ms=broker.clock.time_ms(), required_acks=acks)
        # acks=-1 waits only when the HW does not already cover the append (with ISR = {leader} it
        # always does): wait_for would cost a Task per partition on the hot path.
        if acks == -1 and part.high_watermark <= result.last_offset:
            try:
                await asyncio.wait_for(part.wait_replicated(result.last_offset), timeout_ms / 1000)
            except TimeoutError:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "not replicated in time") from None
        metrics = broker.services.get("metrics")
        if metrics is not None:  # once per partition: bytes as received, records from the offset span
            metrics.record_produce(topic, len(view), result.last_offset - result.base_offset + 1)
        out = _partition_response(index, ErrorCode.NONE)
        out["base_offset"] = result.base_offset
        out["log_append_time_ms"] = result.log_append_time_ms
        out["log_start_offset"] = result.log_start_offset
        return out
    except KafkaError as e:
        _failed(broker, topic)
        return _partition_response(index, e.code, e.message or None)
    except OSError as e:
        log.error("produce to %s-%d failed: %s", topic, index, e)
        _failed(broker, topic)
        return _partition_response(index, ErrorCode.KAFKA_STORAGE_ERROR, str(e))


def _failed(broker: Any, topic: str) -> None:
    metrics = broker.services.get("metrics")
    if metrics is not None:
        metrics.record_failed_produce(topic)


@handler(ApiKey.PRODUCE, 0, 8, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any] | None:
    body = request.body
    acks = body["acks"]
    if ctx.version < 3:
        return _all_failed(request, ErrorCode.UNSUPPORTED_VERSION, "Produce v0-2 is not supported")
    if acks not in (-1, 0, 1):
        return _all_failed(request, ErrorCode.INVALID_REQUIRED_ACKS)
    if body.get("transactional_id") is not None:
        return _all_failed(
            request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactions are not supported"
        )
    timeout_ms = max(0, int(body.get("timeout_ms", 30000)))
    jobs: list[tuple[str, list[Any]]] = []
    for t in body.get("topic_data") or []:
        name = t["name"]
        jobs.append(
            (
                name,
                [_append(ctx, name, p["index"], p["records"], acks, timeout_ms) for p in t["partition_data"]],
            )
        )
    responses = []
    for name, coros in jobs:
        # acks=-1 waits concurrently across partitions; the common single-partition case awaits directly.
        results = [await coros[0]] if len(coros) == 1 else await asyncio.gather(*coros)
        responses.append({"name": name, "partition_responses": list(results)})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}
