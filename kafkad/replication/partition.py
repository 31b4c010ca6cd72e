"""A partition as this broker sees it: a PartitionLog plus its replication role.

Leader (the only role standalone): ISR = {self}; the high watermark is the minimum log end offset over
the ISR, so with ISR={self} it follows the LEO right after each append. acks=-1 waiters complete when
the HW covers their last offset; delayed-fetch waiters are futures woken whenever the HW moves (never
timers). A controller later drives `become_leader(epoch, isr, replicas)` / `become_follower(epoch,
leader)`; followers' fetch positions come in through `update_follower_position`.

Runs on the event loop; never blocks (appends write through the page cache).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from typing import Any, Protocol

from kafkad.protocol.errors import ErrorCode, KafkaError


class PartitionLogLike(Protocol):
    """What Partition needs of storage's PartitionLog (docs/interfaces.md)."""

    topic: str
    partition: int

    @property
    def config(self) -> Any: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @high_watermark.setter
    def high_watermark(self, value: int) -> None: ...
    def append(self, records: memoryview, **kwargs: Any) -> Any: ...
    def read(self, offset: int, max_bytes: int, **kwargs: Any) -> Any: ...
    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None: ...
    def delete_records(self, before_offset: int) -> int: ...
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


class Partition:
    def __init__(self, log: PartitionLogLike, broker_id: int, *, leader_epoch: int = 0) -> None:
        self.log = log
        self.broker_id = broker_id
        self.role = Role.LEADER
        self.leader_epoch = leader_epoch
        self.leader_id: int | None = broker_id
        self.replicas: tuple[int, ...] = (broker_id,)
        self.isr: tuple[int, ...] = (broker_id,)
        self._follower_leo: dict[int, int] = {}
        self._hw_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._data_waiters: set[asyncio.Future[None]] = set()
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
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    # --- role changes (driven by the controller in cluster mode) ---------------------------------
    def become_leader(self, epoch: int, isr: Sequence[int], replicas: Sequence[int]) -> None:
        self.role = Role.LEADER
        self.leader_epoch = epoch
        self.leader_id = self.broker_id
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self._follower_leo = {r: -1 for r in self.replicas if r != self.broker_id}
        self._advance_hw()

    def become_follower(self, epoch: int, leader_id: int, replicas: Sequence[int] = ()) -> None:
        self.role = Role.FOLLOWER
        self.leader_epoch = epoch
        self.leader_id = leader_id
        if replicas:
            self.replicas = tuple(replicas)
        self._fail_hw_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._wake_data_waiters()

    def update_follower_position(self, replica_id: int, log_end_offset: int) -> None:
        """A follower fetched from `log_end_offset`: everything before it is replicated there."""
        if replica_id in self._follower_leo:
            self._follower_leo[replica_id] = log_end_offset
            self._advance_hw()

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
        if self._data_waiters:  # followers fetch beyond the HW (empty checks: once per produce)
            self._wake_data_waiters()
        return result

    async def wait_replicated(self, last_offset: int) -> None:
        """acks=-1: return once the high watermark covers `last_offset`."""
        if self.high_watermark > last_offset:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._hw_waiters.append((last_offset, fut))
        await fut

    # --- fetch -----------------------------------------------------------------------------------
    def read_records(
        self, offset: int, max_bytes: int, *, min_one_batch: bool, committed_only: bool = True
    ) -> Any:
        """Storage's ReadResult from `offset`; consumers see up to the HW, followers up to the LEO."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"{self.topic}-{self.index}: offset {offset} outside "
                f"[{self.log_start_offset}, {self.log_end_offset}]",
            )
        limit = self.high_watermark if committed_only else None
        return self.log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)

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

    def wake_waiters(self) -> None:
        """Wake delayed fetches (e.g. the partition was deleted or truncated)."""
        self._wake_data_waiters()
        self._fail_hw_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # --- internals -------------------------------------------------------------------------------
    def _advance_hw(self) -> None:
        if self.role is not Role.LEADER:
            return
        log = self.log
        new_hw = log.log_end_offset
        isr = self.isr
        if len(isr) != 1 or isr[0] != self.broker_id:  # ISR = {self} (standalone): the HW is the LEO
            for r in isr:
                if r != self.broker_id:
                    new_hw = min(new_hw, self._follower_leo.get(r, -1))
        if new_hw > log.high_watermark:
            log.high_watermark = new_hw
            if self._hw_waiters:
                self._complete_hw_waiters(new_hw)
            if self._data_waiters:
                self._wake_data_waiters()

    def _complete_hw_waiters(self, hw: int) -> None:
        keep = []
        for last, fut in self._hw_waiters:
            if fut.done():
                continue
            if hw > last:
                fut.set_result(None)
            else:
                keep.append((last, fut))
        self._hw_waiters = keep

    def _fail_hw_waiters(self, code: ErrorCode) -> None:
        waiters, self._hw_waiters = self._hw_waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(KafkaError(code, f"{self.topic}-{self.index}: leadership changed"))

    def _wake_data_waiters(self) -> None:
        for fut in list(self._data_waiters):
            if not fut.done():
                fut.set_result(None)
