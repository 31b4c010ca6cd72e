"""A partition as this broker sees it: a PartitionLog plus its replication role.

Leader (the only role standalone): ISR = {self}; the high watermark is the minimum log end offset over
the ISR, so with ISR={self} it follows the LEO right after each append. acks=-1 waiters complete when
the HW covers their last offset; delayed-fetch waiters are futures woken whenever the HW moves (never
timers). In cluster mode the controller drives `become_leader` / `become_follower` (ReplicaManager's
LeaderAndIsr); followers' fetch positions come in through `update_follower_position`, which also keeps
Kafka's last-caught-up time per follower (Replica.updateFetchState) and expands the ISR when a follower
reaches the HW; `maybe_shrink_isr` drops followers that have not caught up within replica.lag.time.max.ms.
Both ISR changes go through the `IsrUpdater` (a conditional write of the partition state znode on the
zkVersion this leader knows); the leader changes nothing itself but the ISR and zkVersion written.

With flush.messages / flush.ms, an append that makes an fsync due starts it (storage/log_sync.py) and the
HW stays at the log's recovery point until that fsync is done, so the HW, and with it every acks=all
answer and what consumers read, only covers records fsynced on the leader (and on the followers, which
fsync before their next fetch reports them).

Runs on the event loop; never blocks (appends write through the page cache).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.replication import delayed_fetch
from kafkad.replication.isr import IsrUpdater, LeaderAndIsr

if TYPE_CHECKING:
    from kafkad.storage.log_sync import LogSync

log = logging.getLogger(__name__)


class PartitionLogLike(Protocol):
    """What Partition needs of storage's PartitionLog (docs/interfaces.md)."""

    topic: str
    partition: int
    directory: Path  # its partition directory (partition.metadata: the topic id)

    @property
    def config(self) -> Any: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def recovery_point(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @high_watermark.setter
    def high_watermark(self, value: int) -> None: ...
    def append(self, records: memoryview, **kwargs: Any) -> Any: ...
    def read(self, offset: int, max_bytes: int, **kwargs: Any) -> Any: ...
    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None: ...
    def delete_records(self, before_offset: int) -> int: ...
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...


_NEVER = float("inf")  # no deadline


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


class FollowerState:
    """What the leader knows of one follower (Kafka's Replica): its log end offset and when it last
    caught up with the leader's log end."""

    __slots__ = ("last_caught_up_ms", "last_fetch_leader_leo", "last_fetch_ms", "leo")

    def __init__(self, last_caught_up_ms: int) -> None:
        self.leo = -1
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_leader_leo = -1
        self.last_fetch_ms = 0

    def update(self, fetch_offset: int, leader_leo: int, now_ms: int) -> None:
        """Kafka's Replica.updateFetchState: caught up now if the fetch reached the leader's LEO, or
        caught up as of the previous fetch if it reached the LEO the leader had then."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leo = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms


class Partition:
    def __init__(
        self, log: PartitionLogLike, broker_id: int, *, leader_epoch: int = 0, log_sync: LogSync | None = None
    ) -> None:
        self.log = log
        self.broker_id = broker_id
        self.role = Role.LEADER
        self.leader_epoch = leader_epoch
        self.leader_id: int | None = broker_id
        self.replicas: tuple[int, ...] = (broker_id,)
        self.isr: tuple[int, ...] = (broker_id,)
        self.zk_version = 0  # of the partition state znode, as the last LeaderAndIsr / ISR write left it
        self.controller_epoch = 0
        self.leader_epoch_start_offset = 0
        self.isr_updater: IsrUpdater | None = None  # cluster mode: how this leader changes its ISR
        self._isr_change: asyncio.Task[None] | None = None
        self._followers: dict[int, FollowerState] = {}
        # acks=-1 Produces parked until the HW passes `last_offset`: (last_offset, future, deadline in loop
        # time). One timer per partition (`_hw_timer`, at the earliest deadline) expires them: a timer per
        # waiter cost every acks=-1 Produce a call_later and its cancel.
        self._hw_waiters: list[tuple[int, asyncio.Future[None], float]] = []
        self._hw_timer: asyncio.TimerHandle | None = None
        self._hw_timer_at = _NEVER
        self._hw_timer_loop: asyncio.AbstractEventLoop | None = None
        self._data_waiters: set[asyncio.Future[None]] = set()
        # Followers' parked fetches: woken by appends only (they read up to the log end; a HW move brings
        # them nothing, and waking them for it made every follower's report re-read the other's fetch),
        # once the bytes appended since they parked reach their min.bytes (delayed_fetch.py; None: any)
        self._append_waiters: dict[asyncio.Future[None], delayed_fetch.Mark | None] = {}
        self.offline = False  # its log failed: the ReplicaManager dropped it; no wait may park here
        # flush.messages / flush.ms (storage/log_sync.py): an append that makes an fsync due starts it here;
        # `pending_sync` is its future (read by the produce handler right after the append), and the HW
        # stays at the recovery point until the fsync covered `_sync_hold`, so the HW never covers records
        # the leader was due to fsync and has not.
        self.log_sync = log_sync
        self.pending_sync: asyncio.Future[None] | None = None
        self._sync_hold = 0
        self._advance_hw()

    @property
    def topic(self) -> str:
        return self.log.topic

    @property
    def index(self) -> int:
        return self.log.partition

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of an unfinished transaction, HW): where read_committed reads stop."""
        log: Any = self.log
        try:
            return int(log.last_stable_offset)
        except AttributeError:  # a log without transactions (unit tests' fakes)
            return int(log.high_watermark)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    # --- role changes (driven by the controller in cluster mode) ---------------------------------
    def become_leader(
        self,
        epoch: int,
        isr: Sequence[int],
        replicas: Sequence[int],
        *,
        zk_version: int = 0,
        controller_epoch: int = 0,
        now_ms: int = 0,
    ) -> None:
        """Kafka's Partition.makeLeader: the new epoch starts at our log end offset; a new leader counts
        followers in the ISR as caught up now, the others as never; a leader staying leader (the controller
        shrank or changed the ISR) keeps what it knows of its followers, so the HW moves at once when the
        ISR shrank to replicas that have the records (acks=all waiters answered without another fetch)."""
        known = self._followers if self.role is Role.LEADER else {}
        self.role = Role.LEADER
        self.leader_epoch = epoch
        self.leader_id = self.broker_id
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.zk_version = zk_version
        self.controller_epoch = controller_epoch
        leo = self.log.log_end_offset
        self.leader_epoch_start_offset = leo
        cache = getattr(self.log, "leader_epoch_cache", None)
        if cache is not None:
            cache.assign(epoch, leo)
        self._followers = {
            r: known.get(r) or FollowerState(now_ms if r in self.isr else 0)
            for r in self.replicas
            if r != self.broker_id
        }
        self._sync_hold = 0  # what it appended as a follower was synced before its fetches reported it
        self._advance_hw()

    def become_follower(
        self,
        epoch: int,
        leader_id: int,
        replicas: Sequence[int] = (),
        *,
        isr: Sequence[int] = (),
        zk_version: int = 0,
        controller_epoch: int = 0,
    ) -> None:
        self.role = Role.FOLLOWER
        self.leader_epoch = epoch
        self.leader_id = leader_id if leader_id >= 0 else None
        if replicas:
            self.replicas = tuple(replicas)
        if isr:
            self.isr = tuple(isr)
        self.zk_version = zk_version
        self.controller_epoch = controller_epoch
        self._followers = {}
        self._fail_hw_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._wake_data_waiters()
        self._release_append_waiters()

    def update_follower_position(self, replica_id: int, log_end_offset: int, now_ms: int = 0) -> None:
        """A follower fetched from `log_end_offset`: everything before it is replicated there."""
        state = self._followers.get(replica_id)
        if state is None:
            return
        state.update(log_end_offset, self.log.log_end_offset, now_ms)
        if replica_id not in self.isr:
            self._maybe_expand_isr(replica_id, log_end_offset)
        self._advance_hw()

    def follower_advanced(self, leader_hw: int, leader_log_start: int) -> None:
        """A follower's fetch came back: its HW is min(leader's HW, its LEO); its log start follows the
        leader's (DeleteRecords) once below its HW."""
        log = self.log
        new_hw = min(leader_hw, log.log_end_offset)
        if new_hw > log.high_watermark:
            log.high_watermark = new_hw
            if self._data_waiters:
                self._wake_data_waiters()
        if log.log_start_offset < leader_log_start <= log.high_watermark:
            log.delete_records(leader_log_start)

    def follower_leo(self, replica_id: int) -> int:
        """The log end offset the leader last saw follower `replica_id` fetch from (-1: unknown)."""
        state = self._followers.get(replica_id)
        return -1 if state is None else state.leo

    # --- ISR changes (leader, cluster mode) --------------------------------------------------------
    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...]:
        """Kafka's getOutOfSyncReplicas: ISR followers behind the leader's LEO that have not caught
        up within `max_lag_ms`."""
        leo = self.log.log_end_offset
        out = []
        for r in self.isr:
            state = self._followers.get(r)
            if state is not None and state.leo != leo and now_ms - state.last_caught_up_ms > max_lag_ms:
                out.append(r)
        return tuple(out)

    def maybe_shrink_isr(self, now_ms: int, max_lag_ms: int) -> bool:
        """Start an ISR shrink through the IsrUpdater if followers lag; True if one was started."""
        if self.role is not Role.LEADER or self.isr_updater is None or self._isr_change is not None:
            return False
        lagging = self.out_of_sync_replicas(now_ms, max_lag_ms)
        if not lagging:
            return False
        new_isr = tuple(r for r in self.isr if r not in lagging)
        log.info(
            "%s-%d: shrinking ISR from %s to %s (out of sync: %s)",
            self.topic,
            self.index,
            list(self.isr),
            list(new_isr),
            list(lagging),
        )
        self._start_isr_change(new_isr)
        return True

    def _maybe_expand_isr(self, replica_id: int, follower_leo: int) -> None:
        """Kafka's maybeExpandIsr: a follower back at the HW and past this epoch's start rejoins."""
        if (
            self.isr_updater is None
            or self._isr_change is not None
            or replica_id not in self.replicas
            or follower_leo < self.log.high_watermark
            or follower_leo < self.leader_epoch_start_offset
        ):
            return
        new_isr = (*self.isr, replica_id)
        log.info("%s-%d: expanding ISR from %s to %s", self.topic, self.index, list(self.isr), list(new_isr))
        self._start_isr_change(new_isr)

    def _start_isr_change(self, new_isr: tuple[int, ...]) -> None:
        self._isr_change = asyncio.get_running_loop().create_task(self._write_isr(new_isr))

    async def _write_isr(self, new_isr: tuple[int, ...]) -> None:
        updater = self.isr_updater
        epoch = self.leader_epoch
        try:
            if updater is None:
                return
            new = LeaderAndIsr(self.broker_id, epoch, new_isr, self.controller_epoch, self.zk_version)
            try:
                version = await updater.update_isr(self.topic, self.index, new)
            except (ConnectionError, TimeoutError) as e:
                log.warning("%s-%d: ISR change to %s failed: %s", self.topic, self.index, list(new_isr), e)
                return
            if version is None:
                log.info(
                    "%s-%d: ISR change to %s fenced (zkVersion %d is stale); waiting for the controller",
                    self.topic,
                    self.index,
                    list(new_isr),
                    self.zk_version,
                )
                return
            if self.role is Role.LEADER and self.leader_epoch == epoch:
                self.isr = new_isr
                self.zk_version = version
                self._advance_hw()
        finally:
            self._isr_change = None

    # --- produce ---------------------------------------------------------------------------------
    def append_as_leader(self, records: memoryview, *, now_ms: int, required_acks: int) -> Any:
        """Append a client's batches; returns storage's AppendResult. Raises KafkaError."""
        if self.role is not Role.LEADER:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.topic}-{self.index}: not the leader")
        if required_acks == -1:
            min_isr = int(getattr(self.log.config, "min_insync_replicas", 1))
            if len(self.isr) < min_isr:
                raise KafkaError(
                    ErrorCode.NOT_ENOUGH_REPLICAS,
                    f"{self.topic}-{self.index}: ISR {len(self.isr)} below min.insync.replicas {min_isr}",
                )
        log = self.log
        result = log.append(records, leader_epoch=self.leader_epoch, now_ms=now_ms)
        if log.config.sync_on_append:  # flush settings (Kafka's defaults: this test only)
            self._synced_append(result.last_offset, required_acks)
            return result
        isr = self.isr
        if len(isr) == 1 and isr[0] == self.broker_id:
            # _advance_hw inlined for ISR = {self} (every standalone partition): the HW is the LEO.
            leo = log.log_end_offset
            if leo > log.high_watermark:
                log.high_watermark = leo
                if self._hw_waiters:
                    self._complete_hw_waiters(leo)
        else:
            self._advance_hw()
        if self._data_waiters:  # consumers woken by the HW move (empty checks: once per produce)
            self._wake_data_waiters()
        if self._append_waiters:  # followers fetch beyond the HW
            self._wake_append_waiters()
        return result

    def has_ongoing_txn(self, producer_id: int) -> bool:
        """Whether `producer_id` has a transaction open on this partition."""
        state = getattr(self.log, "producer_state", None)
        return state is not None and producer_id in state.ongoing

    def txn_marker_count(self, producer_id: int) -> int:
        """The producer state's marker count for `producer_id` (KIP-890's verification guard)."""
        state = getattr(self.log, "producer_state", None)
        return -1 if state is None else int(state.marker_count(producer_id))

    def append_txn_marker(
        self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int, *, now_ms: int
    ) -> int:
        """Append a COMMIT/ABORT control batch ending `producer_id`'s transaction here (the leader);
        returns its offset. Raises KafkaError (NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED, ...)."""
        if self.role is not Role.LEADER:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.topic}-{self.index}: not the leader")
        log: Any = self.log
        offset: int = log.append_txn_marker(
            producer_id,
            producer_epoch,
            committed,
            coordinator_epoch,
            leader_epoch=self.leader_epoch,
            now_ms=now_ms,
        )
        if log.config.sync_on_append:
            self._synced_append(offset, -1)
            return offset
        self._advance_hw()
        if self._data_waiters:
            self._wake_data_waiters()
        if self._append_waiters:  # a follower's parked Fetch takes the marker now, not at its max wait
            self._wake_append_waiters()
        return offset

    def _synced_append(self, last_offset: int, required_acks: int) -> None:
        """After an append to a log with flush settings: start its fsync if they call for one now (acks=0:
        nobody waits for it), hold the HW at the recovery point until it is done, wake waiters."""
        log: Any = self.log
        self.pending_sync = None
        sync = self.log_sync
        if sync is not None and log.sync_due():
            self._sync_hold = max(self._sync_hold, last_offset + 1)
            if required_acks == 0:
                sync.schedule(log)
            else:
                self.pending_sync = sync.request(log, last_offset + 1)
        self._advance_hw()
        if self._data_waiters:
            self._wake_data_waiters()
        if self._append_waiters:
            self._wake_append_waiters()

    def synced(self) -> None:
        """LogSync fsynced this log further: the HW held by `_sync_hold` may move."""
        if self._sync_hold:
            self._advance_hw()

    async def wait_replicated(self, last_offset: int, timeout_s: float | None = None) -> None:
        """acks=-1: return once the high watermark covers `last_offset` (Kafka's DelayedProduce); raises
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is then below min.insync.replicas, TimeoutError after
        `timeout_s`. The timeout is a timer on the waiter's own future, not asyncio.wait_for: no Task per
        acks=-1 Produce, and the follower's fetch that moves the HW resumes the produce handler directly.

        The produce handler's wait starts a loop iteration after its append (asyncio.wait_for makes a
        Task): a pipelined request may have taken the partition offline or moved its leadership since,
        failing the waiters there were. Checked first, as DelayedProduce's tryComplete does: such a wait
        answers at once instead of parking until the request times out."""
        if self.offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.topic}-{self.index} is offline")
        if self.role is not Role.LEADER:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.topic}-{self.index}: leadership changed"
            )
        if self.high_watermark <= last_offset:
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[None] = loop.create_future()
            deadline = _NEVER if timeout_s is None else loop.time() + timeout_s
            entry = (last_offset, fut, deadline)
            self._hw_waiters.append(entry)
            if deadline < self._hw_timer_at or self._hw_timer_loop is not loop:
                self._arm_hw_timer(loop, deadline)
            try:
                await fut
            finally:
                if not fut.done() or fut.cancelled() or fut.exception() is not None:
                    # timed out (DelayedProduce expired) or cancelled: forget it
                    fut.cancel()
                    with contextlib.suppress(ValueError):  # already dropped by a completion or failure pass
                        self._hw_waiters.remove(entry)
        min_isr = int(getattr(self.log.config, "min_insync_replicas", 1))
        if len(self.isr) < min_isr:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                f"{self.topic}-{self.index}: ISR {len(self.isr)} below min.insync.replicas {min_isr}",
            )

    # --- fetch -----------------------------------------------------------------------------------
    def read_records(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool,
        committed_only: bool = True,
        stable_only: bool = False,
    ) -> Any:
        """Storage's ReadResult from `offset`; consumers see up to the HW (read_committed ones,
        `stable_only`, up to the LSO), followers up to the LEO."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            self.check_fetch_offset(offset)
        limit = (self.last_stable_offset if stable_only else self.high_watermark) if committed_only else None
        return self.log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)

    def aborted_txns(self, offset: int, result: Any) -> list[Any]:
        """The aborted transactions (storage's AbortedTxn) overlapping what a read_committed read from
        `offset` returned (`result`, storage's ReadResult): what the consumer skips."""
        find = getattr(self.log, "aborted_txns_for_read", None)
        return [] if find is None else list(find(offset, result, self.last_stable_offset))

    def check_fetch_offset(self, offset: int) -> None:
        """Raise OFFSET_OUT_OF_RANGE unless log start <= `offset` <= log end (what a read checks first)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{self.topic}-{self.index}: offset {offset} outside "
                f"[{self.log_start_offset}, {self.log_end_offset}]",
            )

    def data_waiter(self) -> asyncio.Future[None]:
        """A future resolved at the next append or HW change (delayed fetch); discard it when done."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._data_waiters.add(fut)
        fut.add_done_callback(self._data_waiters.discard)
        return fut

    def add_data_waiter(self, fut: asyncio.Future[None]) -> None:
        """Resolve `fut` (if still pending) at the next append or HW change; one future may watch many
        partitions. The caller must `discard_data_waiter` it when it stops waiting."""
        self._data_waiters.add(fut)

    def discard_data_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.discard(fut)

    def add_append_waiter(
        self, fut: asyncio.Future[None], wanted: delayed_fetch.BytesWanted | None = None
    ) -> None:
        """As add_data_waiter for a follower's fetch: resolved by appends (or a role change, deletion,
        truncation), not by a HW move; with `wanted`, once the bytes appended here and in the other
        partitions sharing it since now reach its count (min.bytes). The caller must
        `discard_append_waiter` it."""
        self._append_waiters[fut] = None if wanted is None else delayed_fetch.mark(self.log, wanted)

    def discard_append_waiter(self, fut: asyncio.Future[None]) -> None:
        self._append_waiters.pop(fut, None)

    def wake_waiters(self) -> None:
        """Wake delayed fetches (e.g. the partition was deleted or truncated)."""
        self._wake_data_waiters()
        self._release_append_waiters()
        self._fail_hw_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # --- internals -------------------------------------------------------------------------------
    def _advance_hw(self) -> None:
        if self.role is not Role.LEADER:
            return
        log = self.log
        new_hw = log.log_end_offset
        isr = self.isr
        if len(isr) != 1 or isr[0] != self.broker_id:  # ISR = {self} (standalone): the HW is the LEO
            followers = self._followers
            for r in isr:
                if r != self.broker_id:
                    state = followers.get(r)
                    new_hw = min(new_hw, state.leo if state is not None else -1)
        hold = self._sync_hold
        if hold and hold > log.recovery_point:  # an fsync the leader owes (flush settings) is not done
            new_hw = min(new_hw, log.recovery_point)
        if new_hw > log.high_watermark:
            log.high_watermark = new_hw
            if self._hw_waiters:
                self._complete_hw_waiters(new_hw)
            if self._data_waiters:
                self._wake_data_waiters()

    def _complete_hw_waiters(self, hw: int) -> None:
        keep = []
        for entry in self._hw_waiters:
            fut = entry[1]
            if fut.done():
                continue
            if hw > entry[0]:
                fut.set_result(None)
            else:
                keep.append(entry)
        self._hw_waiters = keep

    def _fail_hw_waiters(self, code: ErrorCode) -> None:
        waiters, self._hw_waiters = self._hw_waiters, []
        for _, fut, _ in waiters:
            if not fut.done():
                fut.set_exception(KafkaError(code, f"{self.topic}-{self.index}: leadership changed"))

    def _arm_hw_timer(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._hw_timer is not None:
            self._hw_timer.cancel()
        self._hw_timer_at = at
        self._hw_timer = loop.call_at(at, self._expire_hw_waiters)
        self._hw_timer_loop = loop  # a timer of another (closed) loop never fires: tests run one per test

    def _expire_hw_waiters(self) -> None:
        """The partition's timer: waiters past their deadline time out (Kafka's DelayedProduce expiring);
        re-armed at the earliest deadline left. Waiters completed since it was armed just left the list,
        so with a steady flow it fires about once per request timeout, not once per request."""
        self._hw_timer, self._hw_timer_at = None, _NEVER
        loop = asyncio.get_running_loop()
        now = loop.time()
        keep = []
        soonest = _NEVER
        for entry in self._hw_waiters:
            fut, deadline = entry[1], entry[2]
            if fut.done():
                continue
            if deadline <= now:
                fut.set_exception(TimeoutError())
                continue
            keep.append(entry)
            soonest = min(soonest, deadline)
        self._hw_waiters = keep
        if soonest < _NEVER:
            self._arm_hw_timer(loop, soonest)

    def _wake_data_waiters(self) -> None:
        for fut in list(self._data_waiters):
            if not fut.done():
                fut.set_result(None)

    def _wake_append_waiters(self) -> None:
        """After an append: resolve the followers' fetches it brought their min.bytes."""
        delayed_fetch.count(self._append_waiters, self.log)

    def _release_append_waiters(self) -> None:
        """A role change, truncation or deletion: every follower's fetch reads again now."""
        for fut in list(self._append_waiters):
            if not fut.done():
                fut.set_result(None)
