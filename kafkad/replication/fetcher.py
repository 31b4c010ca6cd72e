"""Follower fetchers (Kafka's ReplicaFetcherManager / AbstractFetcherThread / ReplicaFetcherThread).

One `ReplicaFetcher` per (source broker, fetcher index): a partition followed from broker B goes to
fetcher (B, hash(topic, partition) % num.replica.fetchers). Each fetcher is one task over one BrokerChannel
carrying every partition it follows from that broker, in two states per partition:

- truncating (just added, i.e. this broker became a follower, or the leader said our offset is out of its
  range): KIP-101/279. OffsetForLeaderEpoch(replica_id=us, current_leader_epoch, our latest epoch) to the
  leader; the leader answers the end offset of the largest epoch <= ours; if it is one we also have, we cut
  our log at min(its end on the leader, its end here), else we ask again with our largest epoch below the
  leader's answer. No epoch information anywhere: cut to the high watermark. So an old leader's unreplicated
  tail is dropped, never merged.
- fetching: Fetch v11 with replica_id, fetch_offset = our log end, current_leader_epoch; the leader's
  batches are appended byte for byte (AppendOrigin.REPLICATION keeps offsets, epochs and producer state as
  the leader wrote them) and our HW becomes min(leader's HW, our LEO). A partition that returned records
  moves to the end of the next request (Kafka's PartitionStates.updateAndMoveToEnd), so a response cut by
  max_bytes starves none. Requests are encoded by fetch_request.FetchEncoder and responses decoded by
  fetch_response.decode_fetch_response_session (no schema codec on the per-fetch path). Fetches go in a
  KIP-227 session (fetch_session_handler.py): after the first, a request lists only the partitions whose
  fetch offset, log start or leader epoch moved, and the leader answers only partitions that changed.

Errors: NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_TOPIC_OR_PARTITION put the partition aside
for replica.fetch.backoff.ms (the controller's next LeaderAndIsr settles it); UNKNOWN_LEADER_EPOCH (the
leader has not applied its own LeaderAndIsr yet) for 20 ms, doubling up to that backoff;
OFFSET_OUT_OF_RANGE below the leader's log start restarts our log there, above its end re-truncates; a lost
connection backs the whole fetcher off. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from kafkad.protocol import ApiKey, ErrorCode, KafkaError
from kafkad.replication.broker_channel import BrokerChannel
from kafkad.replication.epoch_writes import write_epochs_off_loop
from kafkad.replication.fetch_request import FETCH_VERSION, FetchEncoder, fetch_body
from kafkad.replication.fetch_response import FetchedPartition, decode_fetch_response_session
from kafkad.replication.fetch_session_handler import FetchSessionHandler
from kafkad.storage.log_offline import LogIOError
from kafkad.storage.log_sync import LogSync
from kafkad.storage.log_types import AppendOrigin

if TYPE_CHECKING:
    from kafkad.replication.partition import Partition
    from kafkad.storage.leader_epoch import LeaderEpochCache

log = logging.getLogger(__name__)

OFFSET_FOR_LEADER_EPOCH_VERSION = 3
LEADER_BEHIND_FIRST_S = 0.02  # the first wait after UNKNOWN_LEADER_EPOCH (_delay_after)
UNDEFINED = -1
TP = tuple[str, int]
StorageErrorHook = Callable[[str, int, Exception], object]  # (topic, partition, the error)

_AWAIT_CONTROLLER = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


_SESSION_ERRORS = frozenset(
    {
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    }
)


def _storage(part: Partition) -> Any:
    """The partition's storage PartitionLog (the parts of it Partition's protocol does not list)."""
    return part.log


_BATCH_LENGTH = struct.Struct(">i")  # at offset 8 of a batch: the bytes after this field


def _whole_batches(records: Any) -> memoryview | None:
    """The fetched records without a trailing partial batch (a leader fills partition_max_bytes and may
    cut the last batch short, as Kafka's; the follower takes it whole in its next fetch)."""
    if not records:
        return None
    view = records if isinstance(records, memoryview) else memoryview(records)
    end, size = 0, len(view)
    while end + 12 <= size:
        n = end + 12 + _BATCH_LENGTH.unpack_from(view, end + 8)[0]
        if n > size or n <= end + 12:
            break
        end = n
    return view[:end] if end else None


def _epoch_behind(plog: Any, epoch: int) -> bool:
    """Whether the log's leader-epoch cache is below `epoch` (so fetched batches may start a new one)."""
    cache = getattr(plog, "leader_epoch_cache", None)  # None: a log without epochs (tests' fakes)
    return cache is not None and bool(cache.latest_epoch < epoch)


def _error_code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:  # a code this broker does not know: treated as any other error
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _from_codec(resp: dict[str, Any]) -> tuple[int, int, list[FetchedPartition]]:
    """A codec-decoded Fetch response as decode_fetch_response_session returns it."""
    return (
        resp.get("error_code", 0),
        resp.get("session_id", 0),
        [
            FetchedPartition(
                t["topic"],
                p["partition_index"],
                p["error_code"],
                p["high_watermark"],
                p["log_start_offset"],
                p["records"],
            )
            for t in resp["responses"]
            for p in t["partitions"]
        ],
    )


class FetcherConfig(NamedTuple):
    """replica.fetch.* and friends (Kafka's names in comments)."""

    broker_id: int
    num_fetchers: int = 1  # num.replica.fetchers
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    partition_max_bytes: int = 1048576  # replica.fetch.max.bytes
    response_max_bytes: int = 10485760  # replica.fetch.response.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    request_timeout_ms: int = 30000  # replica.socket.timeout.ms
    rack: str = ""  # broker.rack


class _Follow:
    """One partition a fetcher follows."""

    __slots__ = ("behind_s", "delayed_until", "epoch", "part", "truncating")

    def __init__(self, part: Partition) -> None:
        self.part = part
        self.epoch = part.leader_epoch
        self.truncating = True
        self.delayed_until = 0.0
        self.behind_s = 0.0  # the last wait for a leader behind our epoch (_delay_after)


class ReplicaFetcher:
    def __init__(
        self, source_id: int, host: str, port: int, cfg: FetcherConfig, now_ms: Callable[[], int]
    ) -> None:
        self.source_id = source_id
        self.cfg = cfg
        self._now_ms = now_ms
        self.channel = BrokerChannel(
            host,
            port,
            client_id=f"replica-fetcher-{cfg.broker_id}-{source_id}",
            request_timeout_ms=cfg.request_timeout_ms + cfg.max_wait_ms,
        )
        self.partitions: dict[TP, _Follow] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.fetches = 0  # completed Fetch requests (tests, metrics)
        self._encoder: FetchEncoder | None = None
        self.session = FetchSessionHandler()  # KIP-227: only changed partitions are listed
        self.on_storage_error: StorageErrorHook | None = None  # FetcherManager's
        self.log_sync: LogSync | None = None  # FetcherManager's (flush.messages / flush.ms)

    def __repr__(self) -> str:
        return f"ReplicaFetcher(source={self.source_id}, {len(self.partitions)} partitions)"

    def add(self, parts: Iterable[Partition]) -> None:
        for part in parts:
            self.partitions[(part.topic, part.index)] = _Follow(part)
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, tps: Iterable[TP]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)

    async def stop(self) -> None:
        task, self._task = self._task, None
        self.channel.close()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # --- the loop --------------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = self.cfg.backoff_ms / 1000
        while True:
            try:
                if not self.partitions:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                now = time.monotonic()
                truncating = [f for f in self.partitions.values() if f.truncating and f.delayed_until <= now]
                if truncating:
                    await self._truncate(truncating)
                    continue
                ready = [f for f in self.partitions.values() if not f.truncating and f.delayed_until <= now]
                if not ready:
                    soonest = min(f.delayed_until for f in self.partitions.values())
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), max(0.0, soonest - now))
                    continue
                await self._fetch(ready)
            except asyncio.CancelledError:
                raise
            except (ConnectionError, TimeoutError) as e:
                log.info("%r: %s; retrying in %d ms", self, e, self.cfg.backoff_ms)
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("%r failed; retrying in %d ms", self, self.cfg.backoff_ms)
                await asyncio.sleep(backoff)

    def _current(self, f: _Follow) -> bool:
        """Still ours to follow at the epoch we started with (a LeaderAndIsr may have moved it)."""
        part = f.part
        return self.partitions.get((part.topic, part.index)) is f and part.leader_epoch == f.epoch

    def _delay(self, f: _Follow) -> None:
        f.delayed_until = time.monotonic() + self.cfg.backoff_ms / 1000

    def _delay_after(self, f: _Follow, code: ErrorCode) -> None:
        """Set a partition aside after a leader's error. UNKNOWN_LEADER_EPOCH says the leader has not
        applied the LeaderAndIsr that gave us this epoch yet: the controller sent it to both at once and the
        leader's is milliseconds away, so ask again soon (LEADER_BEHIND_FIRST_S, doubling up to
        replica.fetch.backoff.ms). Kafka's fetcher waits the whole backoff (1 s) here too, but a leader
        that is still applying the LeaderAndIsr of 1,000 partitions answers the follower's first request
        so for most of them, and acks=all waited that second for the follower after every failover.
        Everything else waits the backoff: the controller's next LeaderAndIsr re-adds the partition."""
        if code is ErrorCode.UNKNOWN_LEADER_EPOCH:
            backoff = self.cfg.backoff_ms / 1000
            f.behind_s = min(backoff, f.behind_s * 2 if f.behind_s else LEADER_BEHIND_FIRST_S)
            f.delayed_until = time.monotonic() + f.behind_s
        else:
            self._delay(f)

    # --- truncation (KIP-101 / KIP-279) -----------------------------------------------------------
    async def _truncate(self, follows: list[_Follow]) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for f in follows:
            latest = _storage(f.part).leader_epoch_cache.latest_epoch
            by_topic.setdefault(f.part.topic, []).append(
                {"partition": f.part.index, "current_leader_epoch": f.epoch, "leader_epoch": latest}
            )
        await self._ask_epochs(follows, by_topic)

    async def _ask_epochs(self, follows: list[_Follow], by_topic: dict[str, list[dict[str, Any]]]) -> None:
        body = {
            "replica_id": self.cfg.broker_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp = await self.channel.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body
        )
        index = {(f.part.topic, f.part.index): f for f in follows}
        again: dict[str, list[dict[str, Any]]] = {}
        for t in resp["topics"]:
            for p in t["partitions"]:
                f = index.get((t["topic"], p["partition"]))
                if f is None or not self._current(f):
                    continue
                code = ErrorCode(p["error_code"])
                if code is not ErrorCode.NONE:
                    log.info(
                        "%s-%d: OffsetForLeaderEpoch from %d: %s",
                        t["topic"],
                        p["partition"],
                        self.source_id,
                        code.name,
                    )
                    self._delay_after(f, code)
                    continue
                try:
                    retry_epoch = self._apply_epoch_answer(f, p["leader_epoch"], p["end_offset"])
                except (LogIOError, OSError) as e:
                    # As an append's I/O error: this partition alone (offline, or delayed if the disk
                    # is full); raised out of here it backed off the whole fetcher and came back at the
                    # next round, so the partitions beside it were never fetched again.
                    log.error("%s-%d: truncation failed: %s", t["topic"], p["partition"], e)
                    if self.on_storage_error is not None:
                        self.on_storage_error(t["topic"], p["partition"], e)
                    self._delay(f)
                    continue
                if retry_epoch is not None:
                    again.setdefault(t["topic"], []).append(
                        {
                            "partition": p["partition"],
                            "current_leader_epoch": f.epoch,
                            "leader_epoch": retry_epoch,
                        }
                    )
        if again:
            await self._ask_epochs(follows, again)

    def _apply_epoch_answer(self, f: _Follow, leader_epoch: int, leader_end: int) -> int | None:
        """Kafka's getOffsetTruncationState; truncates and returns None when done, or the epoch to ask next."""
        part = f.part
        plog = part.log
        leo = plog.log_end_offset
        if leader_end == UNDEFINED:  # the leader knows no epochs: fall back to the high watermark
            target = min(plog.high_watermark, leo)
        elif leader_epoch == UNDEFINED:
            target = min(leader_end, leo)
        else:
            own_epoch, own_end = plog.end_offset_for_epoch(leader_epoch)
            if own_epoch == UNDEFINED:
                target = min(leader_end, leo)
            elif own_epoch != leader_epoch:
                # We never had the leader's epoch: cut at the end of our largest epoch below it, and ask
                # again about that one.
                self._truncate_to(part, min(own_end, leo))
                return own_epoch
            else:
                target = min(leader_end, own_end, leo)
        self._truncate_to(part, target)
        f.truncating = False
        return None

    def _truncate_to(self, part: Partition, offset: int) -> None:
        plog = _storage(part)
        if offset < plog.log_end_offset:
            log.info(
                "%s-%d: truncating from %d to %d (leader %d, epoch %d)",
                part.topic,
                part.index,
                plog.log_end_offset,
                offset,
                self.source_id,
                part.leader_epoch,
            )
            plog.truncate_to(offset)
            part.wake_waiters()

    # --- fetching ----------------------------------------------------------------------------------
    async def _fetch(self, follows: list[_Follow]) -> None:
        """One Fetch of `follows`, in `partitions` order: those that return records move to the end
        (Kafka's PartitionStates.updateAndMoveToEnd), so the next request asks the others first."""
        wanted = [
            (f.part.topic, f.part.index, f.epoch, f.part.log.log_end_offset, f.part.log.log_start_offset)
            for f in follows
        ]
        encoder = self._encoder
        if encoder is None:
            encoder = self._encoder = FetchEncoder(self.cfg, self.channel.client_id)
        sent = {(w[0], w[1]): (f, w[3]) for f, w in zip(follows, wanted, strict=True)}
        session = self.session
        session_id, epoch, listed = session.build(wanted)
        try:
            if encoder.ok:
                frame = encoder.frame(listed, session_id, epoch)
                sent_now = self.channel.send_raw(frame)  # connected: no coroutine or timer per fetch
                answer = await (sent_now if sent_now is not None else self.channel.request_raw(frame))
                error, answered_id, fetched = decode_fetch_response_session(answer)
            else:
                body = fetch_body(self.cfg, listed, session_id, epoch)
                resp = await self.channel.request(ApiKey.FETCH, FETCH_VERSION, body)
                error, answered_id, fetched = _from_codec(resp)
        except BaseException:
            session.failed()  # no answer: the leader's session may be a step ahead; start a new one
            raise
        self.fetches += 1
        session.handle_response(error, answered_id)
        if error:
            if error in _SESSION_ERRORS:  # the next request is a full one: nothing to back off from
                log.info("%r: Fetch session %d: %s", self, session_id, _error_code(error).name)
                return
            log.info("%r: Fetch error %s", self, _error_code(error).name)
            for f in follows:
                self._delay(f)
            return
        now_ms = self._now_ms()
        partitions = self.partitions
        syncs: list[asyncio.Future[None]] | None = None
        epoch_writes: list[LeaderEpochCache] = []
        for p in fetched:
            tp = (p.topic, p.partition)
            entry = sent.get(tp)
            if entry is None:
                continue
            f, offset = entry
            plog = _storage(f.part)
            if not self._current(f) or plog.log_end_offset != offset:
                continue  # moved or truncated while the fetch was out
            if _epoch_behind(plog, f.epoch):
                self._process_deferring_epochs(f, p, now_ms, epoch_writes)
            else:
                self._process(f, p, now_ms)
            if plog.log_end_offset != offset:
                if partitions.get(tp) is f:
                    partitions[tp] = partitions.pop(tp)  # moveToEnd: it was served
                if plog.config.sync_on_append and self.log_sync is not None and plog.sync_due():
                    fut = self.log_sync.request(plog, plog.log_end_offset)
                    if fut is not None:
                        syncs = [fut] if syncs is None else [*syncs, fut]
        if epoch_writes:
            write_epochs_off_loop(epoch_writes)
        if syncs:
            # flush.messages / flush.ms: the next Fetch reports our new log end to the leader (which
            # moves the HW on it), so what was appended is fsynced first, as Kafka's fetcher thread
            # flushes inside its append. A failure took that partition offline (LogSync.on_error).
            await asyncio.gather(*syncs, return_exceptions=True)

    def _process_deferring_epochs(
        self, f: _Follow, p: FetchedPartition, now_ms: int, epoch_writes: list[LeaderEpochCache]
    ) -> None:
        """`_process` for a partition whose log has not seen the leader's epoch yet: an appended batch of a
        new epoch adds it to `epoch_writes` instead of rewriting the checkpoint on the loop (epoch_writes.py)."""
        with _storage(f.part).leader_epoch_cache.writes_deferred_to(epoch_writes):
            self._process(f, p, now_ms)

    def _process(self, f: _Follow, p: FetchedPartition, now_ms: int) -> None:
        part = f.part
        plog = _storage(part)
        if p.error_code == 0:
            records = _whole_batches(p.records)
            if records:
                try:
                    plog.append(records, leader_epoch=f.epoch, now_ms=now_ms, origin=AppendOrigin.REPLICATION)
                except (KafkaError, OSError) as e:
                    log.error("%s-%d: appending replicated batches failed: %s", part.topic, part.index, e)
                    if self.on_storage_error is not None and isinstance(e, (LogIOError, OSError)):
                        # storage_failed: a full disk only delays; else this partition goes offline alone
                        # (and leaves this fetcher), its neighbours keep fetching.
                        self.on_storage_error(part.topic, part.index, e)
                    self._delay(f)
                    return
            part.follower_advanced(p.high_watermark, p.log_start_offset)
            return
        code = _error_code(p.error_code)
        if code is ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_start = p.log_start_offset
            if leader_start >= 0 and plog.log_end_offset < leader_start:
                log.info(
                    "%s-%d: our end %d is below the leader's log start %d: restarting there",
                    part.topic,
                    part.index,
                    plog.log_end_offset,
                    leader_start,
                )
                plog.truncate_fully_and_start_at(leader_start)
            else:
                f.truncating = True
        elif code in _AWAIT_CONTROLLER:
            log.debug("%s-%d: fetch from %d: %s", part.topic, part.index, self.source_id, code.name)
            self._delay_after(f, code)
        else:
            log.warning("%s-%d: fetch from %d: %s", part.topic, part.index, self.source_id, code.name)
            self._delay(f)


class FetcherManager:
    """Kafka's ReplicaFetcherManager: which fetcher follows which partition."""

    def __init__(self, cfg: FetcherConfig, now_ms: Callable[[], int]) -> None:
        self.cfg = cfg
        self._now_ms = now_ms
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[TP, tuple[int, int]] = {}
        # An I/O error appending a partition's replicated batches (ReplicaManager.storage_failed).
        self.on_storage_error: StorageErrorHook | None = None
        self.log_sync: LogSync | None = None  # ReplicaManager's group commit (flush.messages / flush.ms)

    def fetcher_id(self, tp: TP) -> int:
        # Kafka: Utils.abs(31 * topic.hashCode + partition) % numFetchers; any stable spread will do.
        return (sum(tp[0].encode()) * 31 + tp[1]) % max(1, self.cfg.num_fetchers)

    def add(self, parts: Iterable[Partition], leader_id: int, host: str, port: int) -> None:
        groups: dict[tuple[int, int], list[Partition]] = {}
        for part in parts:
            tp = (part.topic, part.index)
            self._remove_one(tp)
            key = (leader_id, self.fetcher_id(tp))
            groups.setdefault(key, []).append(part)
            self._assigned[tp] = key
        for key, ps in groups.items():
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = self.fetchers[key] = ReplicaFetcher(leader_id, host, port, self.cfg, self._now_ms)
                fetcher.on_storage_error = self.on_storage_error
                fetcher.log_sync = self.log_sync
            else:
                fetcher.channel.set_address(host, port)
            fetcher.add(ps)

    def remove(self, tps: Iterable[TP]) -> None:
        for tp in tps:
            self._remove_one(tp)

    def _remove_one(self, tp: TP) -> None:
        key = self._assigned.pop(tp, None)
        if key is not None and key in self.fetchers:
            self.fetchers[key].remove((tp,))

    def following(self, tp: TP) -> int | None:
        """The broker `tp` is fetched from, if any."""
        key = self._assigned.get(tp)
        return None if key is None else key[0]

    async def shutdown_idle(self) -> None:
        """Stop fetchers left with no partitions (Kafka's shutdownIdleFetcherThreads)."""
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[key]
                await fetcher.stop()

    async def shutdown(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._assigned.clear()
        await asyncio.gather(*(f.stop() for f in fetchers), return_exceptions=True)
