"""Fetch (1) v0-17: FileSlice records for sendfile, long poll woken by appends, sessionless only.

Limits as Kafka: each partition reads at most partition_max_bytes and the response at most max_bytes,
except that the first batch found is returned whole even if larger (so a consumer can always make
progress). If fewer than min_bytes are available and max_wait_ms > 0, the request parks on one future
that every watched partition resolves when its high watermark moves (a follower's: when the bytes appended
since it parked reach min_bytes, as Kafka's DelayedFetch, replication/delayed_fetch.py), with no polling,
bounded by one deadline timer.
Fetch sessions (KIP-227, v7+): replication/fetch_session.py, as Kafka's FetchManager; an incremental
request is served over every partition of its session and answered with the partitions that changed.
read_committed (isolation_level 1) consumers read up to the last stable offset and get the aborted
transactions overlapping what they read (`_aborted`); followers and read_uncommitted up to the HW.
A follower (replica_id >= 0) reads up to the log end and its fetch offset is its log end offset
(Partition.update_follower_position: HW, ISR expansion). A current_leader_epoch (v9+) other than ours
answers FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH (newer), as KIP-320. replica_id -2 (Kafka's
debugging consumer) and consumers at v11+ (KIP-392) may read a follower, up to its high watermark; with
replica.selector.class set, a leader points a consumer that sent its rack to an in-sync replica there
(preferred_read_replica, no records).
v12 (KIP-320, flexible): a last_fetched_epoch whose end offset in our epoch cache is below the fetch
offset (or whose epoch we never had) answers diverging_epoch {epoch, end_offset} and no records, as
Kafka's Partition.fetchRecords, so a consumer detects truncation from the fetch itself.
v13+ name topics by id (KIP-516, the control plane's topic_name; an unknown id answers UNKNOWN_TOPIC_ID),
v15+ carry the follower's id in replica_state; v16's node endpoints and v17's replica directory id are left at their
defaults (no KIP-951 leader hints, no KRaft directories).
v0-3 read message format v0 (v0-1) or v1 (v2-3): the v2 batches read are down-converted on a worker
thread after the long poll (storage/records/legacy.py), as Kafka does with message.downconversion.enable
(default true): uncompressed messages from the fetch offset on, control batches and headers left out.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request
from kafkad.replication import delayed_fetch, fetch_session
from kafkad.replication.partition import Partition
from kafkad.storage.records import legacy

DEBUGGING_CONSUMER_ID = -2  # Kafka's: reads any replica up to its HW (kafkad-replica-verification)
READ_COMMITTED = 1
_NO_ABORTED: list[Any] = []


def _partition_error(index: int, code: ErrorCode) -> dict[str, Any]:
    # Kafka's FetchResponse.partitionResponse: empty records (size 0), never null. librdkafka rejects
    # the whole response on a null MessageSet ("invalid MessageSetSize -1") and so never sees the
    # error: an out-of-range consumer would spin instead of resetting.
    return {
        "partition_index": index,
        "error_code": int(code),
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "session_id": 0,
        "responses": [
            {
                "topic": t["topic"],
                "topic_id": t["topic_id"],
                "partitions": [_partition_error(p["partition"], code) for p in t["partitions"]],
            }
            for t in request.body.get("topics") or []
        ],
    }


def _read_all(
    ctx: RequestContext, request: Request
) -> tuple[list[dict[str, Any]], int, bool, list[Partition]]:
    """One pass over the requested partitions: (responses, bytes, any_error, partitions to wait on)."""
    body = request.body
    replicas = ctx.broker.replicas
    version = ctx.version
    # v15+ (KIP-903) moved the follower's id into replica_state
    replica_id = body.get("replica_id", -1) if version < 15 else body["replica_state"]["replica_id"]
    by_id = version >= 13  # KIP-516: topics named by id
    follower = replica_id >= 0
    # Reads a follower may serve: Kafka's debugging consumer, and consumers at v11+ (KIP-392), up to its HW.
    from_any_replica = replica_id == DEBUGGING_CONSUMER_ID or (replica_id == -1 and ctx.version >= 11)
    client_rack = body.get("rack_id") or ""
    selector = ctx.broker.replica_selector if client_rack and not follower else None
    now_ms = ctx.broker.clock.time_ms() if follower else 0
    budget = max(0, int(body.get("max_bytes", 0x7FFFFFFF)))
    total = 0
    errors = False
    watched: list[Partition] = []
    responses = []
    metrics = ctx.broker.metrics
    # Kafka: null for read_uncommitted, the list of aborted transactions for read_committed (one shared,
    # never mutated empty list unless a read finds some).
    committed = body.get("isolation_level", 0) == READ_COMMITTED and not follower
    aborted: list[Any] | None = _NO_ABORTED if committed else None
    for t in body.get("topics") or []:
        if by_id:
            tid = t["topic_id"]
            found = ctx.broker.control_plane.topic_name(tid)
            if found is None:
                parts = [
                    _partition_error(p["partition"], ErrorCode.UNKNOWN_TOPIC_ID) for p in t["partitions"]
                ]
                responses.append({"topic": "", "topic_id": tid, "partitions": parts})
                errors = True
                continue
            name = found
        else:
            name = t["topic"]
        parts = []
        for p in t["partitions"]:
            index = p["partition"]
            part = replicas.get(name, index)
            if part is None:  # not here, or offline (KAFKA_STORAGE_ERROR)
                parts.append(_partition_error(index, replicas.missing_error(name, index)))
                errors = True
                continue
            watched.append(part)
            out: dict[str, Any] = {
                "partition_index": index,
                "error_code": 0,
                "high_watermark": part.high_watermark,
                "last_stable_offset": part.last_stable_offset,
                "log_start_offset": part.log_start_offset,
                "aborted_transactions": aborted,
                "preferred_read_replica": -1,
                "records": [],
            }
            try:
                if not part.is_leader and not (
                    replica_id == DEBUGGING_CONSUMER_ID or (from_any_replica and part.leader_epoch >= 0)
                ):
                    # A consumer reads a follower from Fetch v11 (KIP-392: Kafka builds client metadata
                    # for every v11+ fetch, rack or not), but never a log no LeaderAndIsr made a replica
                    # yet (a restarted broker's loaded log, which Kafka does not host until then). A
                    # consumer with stale metadata then asks again instead of getting OFFSET_OUT_OF_RANGE
                    # from a replica that lost its tail (power loss) and resetting to the beginning.
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                epoch = p.get("current_leader_epoch", -1)
                if epoch != part.leader_epoch and epoch >= 0:  # Fetch v9+ (KIP-320)
                    raise KafkaError(
                        ErrorCode.FENCED_LEADER_EPOCH
                        if epoch < part.leader_epoch
                        else ErrorCode.UNKNOWN_LEADER_EPOCH
                    )
                if selector is not None:
                    preferred = selector(part, client_rack)
                    if preferred >= 0:  # KIP-392: read from an in-sync replica in the client's rack
                        out["preferred_read_replica"] = preferred
                        errors = True  # answer now, as Kafka does with a preferred read replica
                        parts.append(out)
                        continue
                last_fetched = p.get("last_fetched_epoch", -1)
                if last_fetched >= 0:  # Fetch v12+ (KIP-320): has the log diverged from the fetcher's?
                    epoch, end = part.log.end_offset_for_epoch(last_fetched)
                    if epoch < last_fetched or end < p["fetch_offset"]:
                        out["diverging_epoch"] = {"epoch": epoch, "end_offset": end}
                        errors = True  # answer now, as Kafka does on divergence
                        parts.append(out)
                        continue
                limit = min(int(p["partition_max_bytes"]), budget - total)
                if limit > 0 or total == 0:
                    result = part.read_records(
                        p["fetch_offset"],
                        max(limit, 0),
                        min_one_batch=total == 0,
                        committed_only=not follower,
                        stable_only=committed,
                    )
                    if result.size:
                        out["records"] = list(result.slices)
                        total += result.size
                        if committed:  # read_committed: the aborted transactions it must skip
                            out["aborted_transactions"] = _aborted(part, p["fetch_offset"], result) or aborted
                else:  # max_bytes reached: no read, but its offset is checked as a read would (Kafka's)
                    part.check_fetch_offset(p["fetch_offset"])
                if follower:  # only an offset a read accepted moves the follower (updateFollowerFetchState)
                    part.update_follower_position(replica_id, p["fetch_offset"], now_ms)
            except (KafkaError, OSError) as exc:  # an I/O error may take the partition offline
                if metrics is not None:
                    metrics.record_failed_fetch(name)
                out = _partition_error(index, replicas.error_for(name, index, exc).code)
                out["high_watermark"] = part.high_watermark
                out["log_start_offset"] = part.log_start_offset
                errors = True
            parts.append(out)
        if by_id:
            responses.append({"topic": name, "topic_id": tid, "partitions": parts})
        else:
            responses.append({"topic": name, "partitions": parts})
    return responses, total, errors, watched


def _aborted(part: Partition, offset: int, result: Any) -> list[dict[str, Any]] | None:
    """A read_committed read's aborted transactions (those overlapping it, which the consumer skips)."""
    found = part.aborted_txns(offset, result)
    if not found:
        return None
    return [{"producer_id": a.producer_id, "first_offset": a.first_offset} for a in found]


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _watch(
    ctx: RequestContext,
    body: Mapping[str, Any],
    watched: list[Partition],
    woken: asyncio.Future[None],
    needed: int,
) -> Callable[[Partition, asyncio.Future[None]], None]:
    """Park `woken` on the watched partitions; returns how to discard it from each. A follower's fetch
    (it reads to the log end) is woken by appends once `needed` more bytes were appended over all its
    partitions (Kafka's DelayedFetch, replication/delayed_fetch.py), a consumer's by HW moves."""
    replica_id = body.get("replica_id", -1) if ctx.version < 15 else body["replica_state"]["replica_id"]
    if replica_id >= 0:
        wanted = delayed_fetch.BytesWanted(needed) if needed > 1 else None
        for part in watched:
            part.add_append_waiter(woken, wanted)
        return Partition.discard_append_waiter
    for part in watched:
        part.add_data_waiter(woken)
    return Partition.discard_data_waiter


def _session_context(
    ctx: RequestContext, request: Request
) -> tuple[fetch_session.FetchContext | None, Request]:
    """The request's fetch session context (None: Fetch v0-6 or sessionless) and the request to serve:
    for an incremental one, every partition of its session (KIP-227)."""
    body = request.body
    if ctx.version < fetch_session.SESSIONS_FROM_VERSION or (
        body.get("session_id", 0) == 0 and body.get("session_epoch", -1) == fetch_session.FINAL_EPOCH
    ):
        return None, request  # the sessionless fetch, as before sessions: nothing to look up
    version = ctx.version
    follower = (body.get("replica_id", -1) if version < 15 else body["replica_state"]["replica_id"]) >= 0
    session = fetch_session.new_context(
        ctx.broker.fetch_sessions, version, body, follower, ctx.broker.clock.time_ms()
    )
    if session.session is not None:
        request = Request(request.header, {**body, "topics": session.topics})
    return session, request


def _session_answer(
    ctx: RequestContext, session: fetch_session.FetchContext | None, responses: list[dict[str, Any]]
) -> Mapping[str, Any]:
    if session is None:
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
    error, session_id, responses = fetch_session.finish(
        ctx.broker.fetch_sessions, session, responses, ctx.broker.clock.time_ms()
    )
    return {"throttle_time_ms": 0, "error_code": int(error), "session_id": session_id, "responses": responses}


@handler(ApiKey.FETCH, 0, 17, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    session, request = _session_context(ctx, request)
    if session is not None and session.error:
        return {"throttle_time_ms": 0, "error_code": int(session.error), "session_id": 0, "responses": []}
    body = request.body
    loop = asyncio.get_running_loop()
    max_wait_ms = max(0, int(body.get("max_wait_ms", 0)))
    min_bytes = int(body.get("min_bytes", 1))
    deadline = loop.time() + max_wait_ms / 1000
    while True:
        responses, total, errors, watched = _read_all(ctx, request)
        remaining = deadline - loop.time()
        if total >= min_bytes or errors or remaining <= 0 or not watched or ctx.broker.stopping:
            break
        # One future for all partitions and one timer (asyncio.wait's wrapper and per-future
        # callbacks cost ~5 us more per park). Registered right after the read with no await in
        # between, so no append can slip past unseen; the loop re-reads after every wake-up.
        woken: asyncio.Future[None] = loop.create_future()
        discard = _watch(ctx, body, watched, woken, min_bytes - total)
        timer = loop.call_later(remaining, _resolve, woken)
        try:
            await woken
        finally:
            timer.cancel()
            for part in watched:
                discard(part, woken)
    metrics = ctx.broker.metrics
    if metrics is not None:  # after the long poll, so a re-read is not counted twice
        for t in responses:
            for p in t["partitions"]:
                if p["records"]:
                    metrics.record_fetch(t["topic"], sum(s.size for s in p["records"]))
    if ctx.version < 4:  # message format v0/v1 readers
        magic = 0 if ctx.version < 2 else 1
        await asyncio.to_thread(_down_convert, body, responses, magic)
    elif 0 < total <= INLINE_MAX:
        _inline_small(responses)
    return _session_answer(ctx, session, responses)


INLINE_MAX = 32 << 10  # a response with at most this many record bytes is sent in one write
_RWF_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)


class CachedSlice(bytes):
    """A FileSlice's bytes read into memory: the encoder writes them inline, and like a FileSlice it
    has `size` and `read()` (tests and tools read either kind the same way)."""

    __slots__ = ()

    @property
    def size(self) -> int:
        return len(self)

    def read(self) -> bytes:
        return bytes(self)


def _inline_small(responses: list[dict[str, Any]]) -> None:
    """Replace the FileSlices of a small response by their bytes, read from the page cache.

    A tailing consumer's fetch carries a few hundred bytes: as slices it leaves as a write of the bytes
    before them, a sendfile and a write of the tagged fields after (three syscalls and three TCP
    segments, each waking the client); inlined, one write. preadv2 RWF_NOWAIT never waits for the disk:
    a slice not in the page cache (or a kernel without RWF_NOWAIT) stays a slice for sendfile.
    """
    if _RWF_NOWAIT is None:
        return
    for t in responses:
        for p in t["partitions"]:
            slices = p["records"]
            if not slices or type(slices) is not list:
                continue
            cached = []
            for s in slices:
                buf = bytearray(s.size)
                try:
                    got = os.preadv(s.fd, [buf], s.position, _RWF_NOWAIT)
                except OSError:  # EAGAIN (not cached), EOPNOTSUPP: sendfile reads it
                    return
                if got != s.size:  # the file is shorter: sendfile reports the broken slice
                    return
                cached.append(CachedSlice(buf))
            p["records"] = cached


def _down_convert(body: Mapping[str, Any], responses: list[dict[str, Any]], magic: int) -> None:
    """Blocking (a worker thread): each partition's FileSlices read and turned into a v0/v1 message set
    from its fetch offset on (responses are in the request's order below v13)."""
    for t_req, t_resp in zip(body.get("topics") or [], responses, strict=True):
        for p_req, p_resp in zip(t_req["partitions"], t_resp["partitions"], strict=True):
            slices = p_resp["records"]
            if slices:
                data = b"".join(s.read() for s in slices)
                p_resp["records"] = legacy.down_convert(data, magic, p_req["fetch_offset"])
