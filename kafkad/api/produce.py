"""Produce (0) v0-11. v0-2 carry message format v0/v1: each partition's message set is checked (CRC,
compressed wrappers) and up-converted to one v2 batch before the append (storage/records/legacy.py),
CORRUPT_MESSAGE if broken, INVALID_RECORD for a v2 batch.

Per partition: find the leader Partition, reject zstd below v7 (the only versions where the check can
apply), check the disk budget, append (storage validates CRC/size/sequence and patches offsets in place).
Every partition is appended before any waiting; then acks=-1 partitions whose append the high watermark
does not cover yet wait for it within timeout_ms (never with ISR = {this broker}: the HW follows the LEO).
When flush.messages / flush.ms call for an fsync (`PartitionLog.sync_due`), `Partition.append_as_leader`
starts it (storage/log_sync.py's group commit: one fdatasync covers every append that came in while the
previous one ran) and the partition's answer waits for it (`Partition.pending_sync`); acks=0 only starts it.
acks=0 gets no response at all. This is the small-Produce hot path: a plain function per partition (no
coroutine), one metrics lookup per request, and a success response holding only the fields that differ from
the schema's defaults (record_errors and error_message come from the encoder's defaults).

A compacted topic (cleanup.policy contains "compact") refuses records without a key, as Kafka's
LogValidator does: the partition answers INVALID_RECORD with one record_errors entry per keyless record
(v8+) and nothing of it is appended. Only these partitions have their records walked (key_check.py);
every other topic's batches are never decoded.

Transactions (v3+ `transactional_id`): the batches are appended as any idempotent producer's (the
partition's producer state opens the transaction). KIP-890: a transactional batch of a producer with no
transaction ongoing on the partition is first checked with the transaction coordinator
(`broker.txn_verifier`, replication/txn_verify.py; accepted when there is none), so a late
write of a finished transaction cannot open a new one that nobody will end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.replication.partition import Partition
from kafkad.replication.txn_verify import TxnVerifier
from kafkad.storage.records import Compression, legacy, read_header, validate_client_batches
from kafkad.storage.records.batch import TRANSACTIONAL_FLAG
from kafkad.storage.records.key_check import null_key_indexes

if TYPE_CHECKING:
    from kafkad.api.broker import Broker

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


def _up_convert(records: memoryview) -> memoryview:
    """Produce v0-2 (Kafka's ProduceRequest.validateRecords, then LogValidator's conversion): v2 batches
    are INVALID_RECORD below v3; a v0/v1 message set becomes one v2 batch, CORRUPT_MESSAGE if broken."""
    if legacy.magic_of(records) >= 2:
        raise KafkaError(
            ErrorCode.INVALID_RECORD, "Produce requests below v3 may only hold message format v0/v1"
        )
    return memoryview(legacy.up_convert(records))


def _check_compression(records: memoryview) -> None:
    """Below v7 a zstd batch is refused (Kafka: zstd needs Produce v7+); callers skip this from v7 on."""
    pos = 0
    while pos + 61 <= len(records):
        h = read_header(records, pos)
        if h.compression is Compression.ZSTD:
            raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later")
        pos += h.size


class _Wait(NamedTuple):
    """A partition whose answer waits: acks=-1 for the HW to cover its append (only with followers in
    the ISR), and/or for its fsync (flush.messages / flush.ms: `sync`, from LogSync)."""

    out: dict[str, Any]
    part: Partition
    topic: str
    last_offset: int
    sync: asyncio.Future[None] | None = None
    replicated: bool = True  # acks=-1: wait for the HW


def _append(
    broker: Broker,
    version: int,
    metrics: Any,
    topic: str,
    p: Mapping[str, Any],
    acks: int,
    waits: list[_Wait],
) -> dict[str, Any]:
    """Append one partition's records now; the partition's response (an acks=-1 wait goes to `waits`)."""
    index = p["index"]
    records = p["records"]
    try:
        if not records:  # None or empty
            raise KafkaError(ErrorCode.INVALID_RECORD, "no records")
        replicas = broker.replicas
        part = replicas.get_or_raise(topic, index)
        view = records if isinstance(records, memoryview) else memoryview(bytearray(records))
        if version < 3:  # message format v0/v1: checked and up-converted to one v2 batch
            view = _up_convert(view)
        if version < 7:
            _check_compression(view)
        replicas.check_writable()
        if "compact" in part.log.config.cleanup_policy:
            refused = _keyless_response(topic, index, view)
            if refused is not None:
                _failed(metrics, topic)
                return refused
        result = part.append_as_leader(view, now_ms=broker.clock.time_ms(), required_acks=acks)
        if metrics is not None:  # once per partition: bytes as received, records from the offset span
            metrics.record_produce(topic, len(view), result.last_offset - result.base_offset + 1)
        # record_errors and error_message are left to the encoder's defaults ([] and null).
        out = {
            "index": index,
            "error_code": 0,
            "base_offset": result.base_offset,
            "log_append_time_ms": result.log_append_time_ms,
            "log_start_offset": result.log_start_offset,
        }
        # acks=-1 waits only when the HW does not already cover the append (with ISR = {leader} it
        # always does): wait_for would cost a Task per partition on the hot path. Without flush
        # settings (Kafka's defaults) the fsync costs one attribute test here.
        if part.log.config.sync_on_append:  # the fsync append_as_leader started, if flush settings asked
            sync = part.pending_sync
            if sync is not None:
                hw = acks == -1 and part.high_watermark <= result.last_offset
                waits.append(_Wait(out, part, topic, result.last_offset, sync, hw))
                return out
        if acks == -1 and part.high_watermark <= result.last_offset:
            waits.append(_Wait(out, part, topic, result.last_offset))
        return out
    except (KafkaError, OSError) as exc:  # an I/O error may take the partition offline (storage_failed)
        _failed(metrics, topic)
        # No local may hold the error past this block: exc -> traceback -> this frame -> local -> exc
        # is a cycle that keeps the raising frames (e.g. a 64 MiB decompression buffer) alive until
        # the cyclic GC runs.
        return _error_response(broker, topic, index, exc)


def _error_response(broker: Any, topic: str, index: int, exc: Exception) -> dict[str, Any]:
    e = broker.replicas.error_for(topic, index, exc)
    return _partition_response(index, e.code, e.message or None)


async def _replicated(w: _Wait, timeout_ms: int, metrics: Any) -> None:
    """Wait for `w`'s fsync (if any), then with acks=-1 for the HW to cover its append; on failure its
    response becomes the error (a failed fsync took the partition offline: KAFKA_STORAGE_ERROR)."""
    try:
        if w.sync is not None:
            try:
                await w.sync
            except KafkaError:
                raise
            except Exception as e:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{w.topic}: fsync failed: {e}") from None
        if w.replicated:
            try:
                await w.part.wait_replicated(w.last_offset, timeout_ms / 1000)
            except TimeoutError:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "not replicated in time") from None
    except KafkaError as e:
        _failed(metrics, w.topic)
        index = w.out["index"]
        w.out.clear()
        w.out.update(_partition_response(index, e.code, e.message or None))


def _has_transactional(body: Mapping[str, Any]) -> bool:
    """Whether a partition's first batch is transactional (attributes' low byte at 22), as Kafka's
    RequestUtils.flags looks at each partition's first batch."""
    for t in body.get("topic_data") or ():
        for p in t["partition_data"]:
            records = p["records"]
            if records is not None and len(records) > 22 and records[22] & TRANSACTIONAL_FLAG:
                return True
    return False


async def _verify_txn(
    broker: Broker, body: Mapping[str, Any], txn_id: str, verifier: TxnVerifier
) -> dict[tuple[str, int], ErrorCode]:
    """KIP-890: a transactional batch that would open a transaction on a partition (its producer has
    none ongoing there) is checked with the coordinator first; the partitions it refuses, and why."""
    checks: list[tuple[tuple[str, int], Any]] = []
    guards: list[tuple[Partition, int, int]] = []  # (partition, producer id, its marker count before)
    for t in body.get("topic_data") or ():
        for p in t["partition_data"]:
            records = p["records"]
            part = broker.replicas.get(t["name"], p["index"])
            if not records or part is None or len(records) < 61:
                continue  # _append answers these
            try:
                h = read_header(records if isinstance(records, memoryview) else memoryview(records), 0)
            except KafkaError:
                continue
            if not h.attributes & TRANSACTIONAL_FLAG or h.producer_id < 0:
                continue
            if part.has_ongoing_txn(h.producer_id):
                continue
            key = (t["name"], p["index"])
            guards.append((part, h.producer_id, part.txn_marker_count(h.producer_id)))
            checks.append(
                (key, verifier.verify(txn_id, h.producer_id, h.producer_epoch, t["name"], p["index"]))
            )
    if not checks:
        return {}
    codes = await asyncio.gather(*(c for _, c in checks), return_exceptions=True)
    refused = {}
    for (key, _), code, (part, pid, markers) in zip(checks, codes, guards, strict=True):
        if isinstance(code, BaseException):
            log.warning("transaction verification of %s-%d failed: %r", key[0], key[1], code)
            refused[key] = ErrorCode.COORDINATOR_NOT_AVAILABLE  # retriable for the client
        elif code != ErrorCode.NONE:
            refused[key] = ErrorCode(code)
        elif part.txn_marker_count(pid) != markers:
            # Kafka's VerificationGuard: a marker ended the transaction while the coordinator answered;
            # appending now would open a transaction nobody ends (a hanging transaction).
            refused[key] = ErrorCode.INVALID_TXN_STATE
    return refused


def _failed(metrics: Any, topic: str) -> None:
    if metrics is not None:
        metrics.record_failed_produce(topic)


@handler(ApiKey.PRODUCE, 0, 11, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any] | None:
    body = request.body
    acks = body["acks"]
    version = ctx.header.api_version
    if acks not in (-1, 0, 1):
        return _all_failed(request, ErrorCode.INVALID_REQUIRED_ACKS)
    broker = ctx.broker
    refused: dict[tuple[str, int], ErrorCode] | None = None
    txn_id = body.get("transactional_id")
    if txn_id is None:
        if version >= 3 and _has_transactional(body):  # KafkaApis: needs a transactional id (and its ACL)
            return _all_failed(
                request,
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "transactional records need the request's transactional_id",
            )
    else:
        verifier = broker.txn_verifier
        if verifier is not None:
            refused = await _verify_txn(broker, body, txn_id, verifier)
    metrics = broker.metrics  # once per request, not per partition
    waits: list[_Wait] = []
    responses = []
    # Every partition is appended first, then the acks=-1 waits (if any) run concurrently, as Kafka's
    # DelayedProduce does; with nothing to wait for no coroutine or Task is made per partition.
    for t in body.get("topic_data") or ():
        name = t["name"]
        parts = t["partition_data"]
        if refused:
            out = [
                _partition_response(p["index"], refused[(name, p["index"])])
                if (name, p["index"]) in refused
                else _append(broker, version, metrics, name, p, acks, waits)
                for p in parts
            ]
        elif len(parts) == 1:  # the common case, without a comprehension's frame
            out = [_append(broker, version, metrics, name, parts[0], acks, waits)]
        else:
            out = [_append(broker, version, metrics, name, p, acks, waits) for p in parts]
        responses.append({"name": name, "partition_responses": out})
    if waits:
        timeout_ms = max(0, int(body.get("timeout_ms", 30000)))
        if len(waits) == 1:
            await _replicated(waits[0], timeout_ms, metrics)
        else:
            await asyncio.gather(*(_replicated(w, timeout_ms, metrics) for w in waits))
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}
