"""The controller's state changes: partition/replica transitions with their ZooKeeper writes and requests.

Kafka's PartitionStateMachine + ReplicaStateMachine + the KafkaController callbacks (onNewPartitionCreation,
onBrokerStartup, onBrokerFailure, controlled shutdown, preferred election). Every ZooKeeper write is a
multi whose first op checks /controller_epoch's zkVersion: BADVERSION there raises ControllerMovedError
(the caller resigns). A partition state write is conditional on the state znode's zkVersion; when the
leader moved it meanwhile (an ISR change), the state is re-read and the change computed again.

Runs inside the controller's event processing, one event at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Coroutine, Iterable, Sequence
from typing import Any

from kafkad.controller.channel import Callback, RequestBatch
from kafkad.controller.context import TP, ControllerContext
from kafkad.controller.state_machines import (
    Election,
    PartitionStateName,
    ReplicaStateName,
    controlled_shutdown_election,
    offline_election,
    partition_transition_ok,
    preferred_election,
    replica_transition_ok,
)
from kafkad.zk.client import (
    ZK_CONNECTION_ERRORS,
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    Op,
    SetOp,
    Watch,
    ZkClient,
)
from kafkad.zk.znodes import CONTROLLER_EPOCH, PartitionState, PartitionStateZNode, TopicPartitionZNode

log = logging.getLogger(__name__)

PS, RS = PartitionStateName, ReplicaStateName
NO_LEADER = -1
Elector = Callable[[TP, PartitionState], Election | None]
# Partition state writes per ZooKeeper multi in update_states (~200 B each: far below jute.maxbuffer).
WRITE_BATCH = 100


class ControllerMovedError(Exception):
    """/controller_epoch moved: another controller was elected; this one must stop acting."""


async def _all(coros: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run the per-partition ZooKeeper writes concurrently (kazoo pipelines them); a moved controller
    aborts the event, and so does a lost ZooKeeper session or connection (the event is redone from ZooKeeper
    on reconnect); any other failure of one partition is logged and leaves the others done."""
    for r in await asyncio.gather(*coros, return_exceptions=True):
        if isinstance(r, (ControllerMovedError, ZK_CONNECTION_ERRORS)):
            raise r
        if isinstance(r, BaseException):
            log.warning("partition state write failed: %r", r)


class PartitionOps:
    def __init__(
        self,
        ctx: ControllerContext,
        zk: ZkClient,
        controller_id: int,
        unclean_allowed: Callable[[str], bool],
    ) -> None:
        self.ctx = ctx
        self.zk = zk
        self.controller_id = controller_id
        self.unclean_allowed = unclean_allowed
        self.on_leader_and_isr: Callback | None = None
        self.batch = RequestBatch(ctx, controller_id)

    def new_batch(self) -> None:
        """A fresh (empty) request batch (failover, resignation)."""
        self.batch = RequestBatch(self.ctx, self.controller_id, self.on_leader_and_isr)

    # --- fenced ZooKeeper writes ---------------------------------------------------------------------
    async def fenced(self, ops: Sequence[Op]) -> list[Any]:
        try:
            return await self.zk.multi([CheckOp(CONTROLLER_EPOCH, self.ctx.epoch_zk_version), *ops])
        except BadVersionError:
            # Either our epoch check or a conditional op failed: find out which.
            got = await self.zk.exists(CONTROLLER_EPOCH)
            if got is None or got.version != self.ctx.epoch_zk_version:
                raise ControllerMovedError(
                    f"controller epoch moved (zkVersion {got and got.version})"
                ) from None
            raise

    async def take_notifications(self, path: str, watch: Watch) -> list[bytes]:
        """A notification queue of Kafka's (/isr_change_notification, /log_dir_event_notification): every
        child's data (the children watched for more), the children then deleted in one multi fenced on the
        controller epoch. A child gone meanwhile is skipped."""
        kids = await self.zk.children(path, watch=watch)
        if not kids:
            return []
        got = await asyncio.gather(*(self.zk.get_or_none(f"{path}/{k}") for k in kids))
        with contextlib.suppress(NoNodeError):
            await self.fenced([DeleteOp(f"{path}/{k}") for k in kids])
        return [g[0] for g in got if g is not None]

    async def read_state(self, tp: TP) -> PartitionState | None:
        got = await self.zk.get_or_none(PartitionStateZNode.path(*tp))
        if got is None:
            return None
        return PartitionStateZNode.decode(got[0], got[1].version)

    async def _write_state(self, tp: TP, new: PartitionState) -> PartitionState:
        stats = await self.fenced(
            [SetOp(PartitionStateZNode.path(*tp), PartitionStateZNode.encode(new), new.zk_version)]
        )
        written = new._replace(zk_version=stats[1].version)
        self.ctx.leaders[tp] = written
        return written

    async def update_states(
        self,
        tps: Iterable[TP],
        change: Callable[[TP, PartitionState], PartitionState | None],
        read_first: bool = True,
    ) -> dict[TP, PartitionState]:
        """Apply `change` (None = leave alone) to each partition's current state and write them all
        concurrently; a partition whose znode moved is re-read and retried. Returns the written states.
        With read_first=False the context's state is tried first: the write is conditional on its zkVersion,
        so a state a leader changed meanwhile fails with BADVERSION and only that one is re-read; a decision
        to leave a partition alone writes nothing to fail, so it is confirmed on a fresh read (the context may
        lack an ISR expansion whose notification is still on its way: the replica to remove is in ZooKeeper's
        ISR, not in the context's)."""
        out: dict[TP, PartitionState] = {}

        async def one(tp: TP) -> None:
            # As Kafka (doElectLeaderForPartitions, removeReplicasFromIsr): decide on the state as it is in
            # ZooKeeper now, not as last seen: leaders change ISRs there and notify only later.
            fresh_read = read_first or tp not in self.ctx.leaders
            if fresh_read:
                fresh = await self.read_state(tp)
                if fresh is not None:
                    self.ctx.leaders[tp] = fresh
            for _ in range(5):
                cur = self.ctx.leaders.get(tp)
                if cur is None:
                    return
                new = change(tp, cur)
                if new is None:
                    if fresh_read:
                        return
                    fresh_read = True
                    fresh = await self.read_state(tp)
                    if fresh is None or fresh.zk_version == cur.zk_version:
                        return
                    self.ctx.leaders[tp] = fresh
                    continue
                try:
                    out[tp] = await self._write_state(
                        tp, new._replace(controller_epoch=self.ctx.epoch, zk_version=cur.zk_version)
                    )
                    return
                except BadVersionError:
                    fresh_read = True
                    fresh = await self.read_state(tp)
                    if fresh is None:
                        return
                    self.ctx.leaders[tp] = fresh
            log.warning("giving up on updating the state of %s-%d after repeated version conflicts", *tp)

        await _all(one(tp) for tp in await self._write_batched(list(tps), change, read_first, out))
        return out

    async def _write_batched(
        self,
        tps: list[TP],
        change: Callable[[TP, PartitionState], PartitionState | None],
        read_first: bool,
        out: dict[TP, PartitionState],
    ) -> list[TP]:
        """update_states' first try for many partitions: the changes decided on the states at hand are
        written WRITE_BATCH at a time, each batch one multi (the epoch check, then one conditional set per
        partition). A ZooKeeper round trip through kazoo costs ~0.3 ms of the controller's time, so 1,000
        single writes took 0.3-0.5 s where 10 multis take ~15 ms. All or nothing per multi: a batch whose
        multi fails (a zkVersion that moved, a znode gone) is left to the per-partition path, which re-reads
        and retries as before; so is every partition this pass would leave alone or does not know (that
        path confirms such a decision on a fresh read). Returns the partitions left to that path."""
        if len(tps) < 2:
            return tps
        ctx = self.ctx
        if read_first:  # pipelined reads, as the per-partition path would do them
            fresh = await asyncio.gather(*(self.read_state(tp) for tp in tps))
            for tp, st in zip(tps, fresh, strict=True):
                if st is not None:
                    ctx.leaders[tp] = st
        rest: list[TP] = []
        writes: list[tuple[TP, PartitionState]] = []
        for tp in tps:
            cur = ctx.leaders.get(tp)
            if cur is None:
                if not read_first:
                    rest.append(tp)  # unknown here: the per-partition path reads it
                continue
            new = change(tp, cur)
            if new is None:
                if not read_first:
                    rest.append(tp)  # read_first: the fresh read already confirmed it; nothing to write
                continue
            writes.append((tp, new._replace(controller_epoch=ctx.epoch, zk_version=cur.zk_version)))

        async def batch(chunk: list[tuple[TP, PartitionState]]) -> None:
            ops: list[Op] = [
                SetOp(PartitionStateZNode.path(*tp), PartitionStateZNode.encode(st), st.zk_version)
                for tp, st in chunk
            ]
            try:
                stats = await self.fenced(ops)
            except (BadVersionError, NoNodeError):
                rest.extend(tp for tp, _ in chunk)
                return
            for (tp, st), stat in zip(chunk, stats[1:], strict=True):
                out[tp] = ctx.leaders[tp] = st._replace(zk_version=stat.version)

        await _all(batch(writes[i : i + WRITE_BATCH]) for i in range(0, len(writes), WRITE_BATCH))
        return rest

    # --- state bookkeeping -----------------------------------------------------------------------------
    def set_partition_state(self, tps: Iterable[TP], target: PartitionStateName) -> list[TP]:
        moved = []
        for tp in tps:
            cur = self.ctx.partition_state(tp)
            if partition_transition_ok(cur, target):
                self.ctx.partition_states[tp] = target
                moved.append(tp)
            else:
                log.error(
                    "invalid partition transition %s-%d: %s -> %s", tp[0], tp[1], cur.value, target.value
                )
        return moved

    def set_replica_state(self, replicas: Iterable[tuple[TP, int]], target: ReplicaStateName) -> None:
        for tp, b in replicas:
            cur = self.ctx.replica_state(tp, b)
            if replica_transition_ok(cur, target):
                self.ctx.replica_states[(tp, b)] = target
            else:
                log.debug(
                    "skipped replica transition %s-%d@%d: %s -> %s", tp[0], tp[1], b, cur.value, target.value
                )

    def election_live(self) -> set[int]:
        return self.ctx.live_ids - self.ctx.shutting_down

    def live_for(self, tp: TP, live: set[int]) -> set[int]:
        """`live` without the brokers whose replica of `tp` is on an offline log dir."""
        return live - self.ctx.dir_offline(tp) if self.ctx.replicas_on_offline_dirs else live

    # --- new partitions ------------------------------------------------------------------------------
    async def on_new_partitions(self, tps: Sequence[TP]) -> None:
        """NonExistent -> New -> Online: initial leader = first live replica; ISR = live replicas."""
        ctx = self.ctx
        self.set_partition_state(tps, PS.NEW)
        self.set_replica_state(ctx.replicas_of(tps), RS.NEW)
        live = self.election_live()

        async def create(tp: TP) -> None:
            reps = ctx.assignment[tp]
            isr = tuple(b for b in reps if b in live)
            if not isr:
                log.error(
                    "no live replica of new partition %s-%d (replicas %s): it stays offline",
                    tp[0],
                    tp[1],
                    list(reps),
                )
                return
            st = PartitionState(isr[0], 0, isr, ctx.epoch, 0)
            await self.zk.ensure_path(TopicPartitionZNode.path(*tp))
            try:
                await self.fenced([CreateOp(PartitionStateZNode.path(*tp), PartitionStateZNode.encode(st))])
                ctx.leaders[tp] = st
            except NodeExistsError:  # written by a previous controller already
                existing = await self.read_state(tp)
                if existing is None:
                    return
                ctx.leaders[tp] = existing
            ctx.partition_states[tp] = PS.ONLINE
            self.batch.add_leader_and_isr([b for b in reps if ctx.is_live(b)], tp, is_new=True)

        await _all(create(tp) for tp in tps)
        self.set_replica_state(
            ((tp, b) for tp in tps for b in ctx.assignment[tp] if ctx.is_live(b)), RS.ONLINE
        )

    # --- elections ------------------------------------------------------------------------------------
    async def elect(
        self, tps: Sequence[TP], elector: Elector, read_first: bool = True, exclude: Collection[int] = ()
    ) -> tuple[dict[TP, PartitionState], list[TP]]:
        """Elect leaders with `elector`; writes states, queues LeaderAndIsr to the live replicas (but
        `exclude`). Returns (elected states, partitions that could not get a leader). read_first: see
        update_states."""
        failed: dict[TP, None] = {}  # ordered; a retry on a fresh state decides again

        def change(tp: TP, cur: PartitionState) -> PartitionState | None:
            new = self._elected(tp, cur, elector(tp, cur))
            if new is None:
                failed[tp] = None
            else:
                failed.pop(tp, None)
            return new

        written = await self.update_states(tps, change, read_first)
        for tp in written:
            self.ctx.partition_states[tp] = PS.ONLINE
            self.batch.add_leader_and_isr(
                [b for b in self.ctx.assignment.get(tp, ()) if self.ctx.is_live(b) and b not in exclude], tp
            )
        return written, list(failed)

    def _elected(self, tp: TP, cur: PartitionState, e: Election | None) -> PartitionState | None:
        if e is None:
            return None
        if e.unclean:
            log.warning(
                "unclean leader election for %s-%d: broker %d (data may be lost)", tp[0], tp[1], e.leader
            )
        return PartitionState(e.leader, cur.leader_epoch + 1, e.isr, self.ctx.epoch, cur.zk_version)

    def offline_elector(self) -> Elector:
        live = self.election_live()

        def elector(tp: TP, cur: PartitionState) -> Election | None:
            return offline_election(
                self.ctx.assignment.get(tp, ()), cur.isr, self.live_for(tp, live), self.unclean_allowed(tp[0])
            )

        return elector

    async def trigger_online_partitions(self) -> None:
        """Partitions in New/Offline (and Online without a live leader) get a leader if they can."""
        ctx = self.ctx
        todo = self._needing_election()
        if not todo:
            return
        _, failed = await self.elect(todo, self.offline_elector())
        for tp in failed:
            ctx.partition_states[tp] = PS.OFFLINE
        if failed:
            log.warning("%d partitions have no eligible leader: %s", len(failed), sorted(failed)[:10])

    def _needing_election(self) -> list[TP]:
        ctx = self.ctx
        live = self.election_live()
        return [
            tp
            for tp, st in ctx.leaders.items()
            if tp[0] not in ctx.topics_to_delete
            and (ctx.partition_state(tp) in (PS.NEW, PS.OFFLINE) or st.leader not in self.live_for(tp, live))
        ]

    async def preferred(self, tps: Sequence[TP]) -> tuple[dict[TP, PartitionState], list[TP]]:
        live = self.election_live()

        def elector(tp: TP, cur: PartitionState) -> Election | None:
            return preferred_election(self.ctx.assignment.get(tp, ()), cur.isr, self.live_for(tp, live))

        todo = [
            tp
            for tp in tps
            if (st := self.ctx.leaders.get(tp)) is not None
            and self.ctx.assignment.get(tp, (NO_LEADER,))[0] != st.leader
        ]
        return await self.elect(todo, elector)

    # --- brokers ----------------------------------------------------------------------------------------
    async def on_broker_startup(self, new: Sequence[int]) -> None:
        ctx = self.ctx
        existing = [b for b in ctx.live_ids if b not in new]
        self.batch.add_update_metadata(existing, [])
        self.batch.add_update_metadata(new, list(ctx.leaders))
        replicas = [(tp, b) for b in new for tp in ctx.partitions_on(b)]
        self.set_replica_state(replicas, RS.ONLINE)
        for tp, b in replicas:
            if tp in ctx.leaders and tp[0] not in ctx.topics_to_delete:
                self.batch.add_leader_and_isr([b], tp)
        await self.trigger_online_partitions()

    async def on_broker_failure(self, dead: Sequence[int]) -> None:
        """Kafka's onBrokerFailure: every replica on the dead brokers goes offline."""
        await self.on_replicas_offline([(tp, b) for b in dead for tp in self.ctx.partitions_on(b)])

    async def on_replicas_offline(self, replicas: Sequence[tuple[TP, int]]) -> None:
        """Kafka's onReplicasBecomeOffline (OfflinePartition, triggerOnlinePartitionStateChange, then
        OfflineReplica), for replicas on dead brokers or on a live broker's failed log, with one conditional
        write per partition: a partition led by a gone replica gets its new leader (whose ISR holds online
        replicas only, so the ISR removal has nothing left to do), one it followed the ISR removal; the
        context's zkVersion is tried first and only a partition that moved is re-read."""
        ctx = self.ctx
        gone_by_tp = self._by_tp(replicas)
        led = [
            tp
            for tp, gone in gone_by_tp.items()
            if (st := ctx.leaders.get(tp)) is not None
            and st.leader in gone
            and tp[0] not in ctx.topics_to_delete
        ]
        self.set_partition_state(led, PS.OFFLINE)
        to_elect = set(self._needing_election())
        self.set_replica_state(replicas, RS.OFFLINE)
        elector = self.offline_elector()
        failed: set[TP] = set()

        def change(tp: TP, cur: PartitionState) -> PartitionState | None:
            new: PartitionState | None = None
            failed.discard(tp)  # a retry after BADVERSION decides again
            if tp in to_elect:
                new = self._elected(tp, cur, elector(tp, cur))
                if new is None:
                    failed.add(tp)
            gone = gone_by_tp.get(tp)
            removed = None if gone is None else self._isr_removal(new or cur, gone)
            if removed is not None and new is not None:
                removed = removed._replace(leader_epoch=new.leader_epoch)  # one write, one epoch bump
            return removed or new

        todo = [tp for tp in ctx.leaders if tp in to_elect or tp in gone_by_tp]
        written = await self.update_states(todo, change, read_first=False)
        for tp in to_elect:
            if tp in failed:
                ctx.partition_states[tp] = PS.OFFLINE
            elif tp in written:
                ctx.partition_states[tp] = PS.ONLINE
        for tp, st in written.items():
            if st.leader == NO_LEADER:
                ctx.partition_states[tp] = PS.OFFLINE
            self.batch.add_leader_and_isr(
                [b for b in ctx.assignment.get(tp, ()) if ctx.is_live(b) and b not in gone_by_tp.get(tp, ())],
                tp,
            )
        if failed:
            log.warning("%d partitions have no eligible leader: %s", len(failed), sorted(failed)[:10])
        self.batch.add_update_metadata(ctx.live_ids, [])

    @staticmethod
    def _by_tp(replicas: Iterable[tuple[TP, int]]) -> dict[TP, set[int]]:
        by_tp: dict[TP, set[int]] = {}
        for tp, b in replicas:
            by_tp.setdefault(tp, set()).add(b)
        return by_tp

    def _isr_removal(self, cur: PartitionState, gone: set[int]) -> PartitionState | None:
        """removeReplicasFromIsr: None when none of `gone` is in the ISR or leads."""
        if not (gone & set(cur.isr)) and cur.leader not in gone:
            return None
        leader = NO_LEADER if cur.leader in gone else cur.leader
        isr = cur.isr if len(cur.isr) == 1 else tuple(b for b in cur.isr if b not in gone)
        return PartitionState(leader, cur.leader_epoch + 1, isr, self.ctx.epoch, cur.zk_version)

    async def replicas_offline(self, replicas: Sequence[tuple[TP, int]], read_first: bool = True) -> None:
        """OfflineReplica: drop each from its partition's ISR (leader epoch + 1), as removeReplicasFromIsr;
        a leader that is removed leaves the partition leaderless (-1), and the last ISR member stays."""
        ctx = self.ctx
        by_tp = self._by_tp(replicas)
        self.set_replica_state(replicas, RS.OFFLINE)

        def change(tp: TP, cur: PartitionState) -> PartitionState | None:
            return self._isr_removal(cur, by_tp[tp])

        written = await self.update_states([tp for tp in by_tp if tp in ctx.leaders], change, read_first)
        for tp, st in written.items():
            if st.leader == NO_LEADER:
                ctx.partition_states[tp] = PS.OFFLINE
            live = [b for b in ctx.assignment.get(tp, ()) if ctx.is_live(b) and b not in by_tp[tp]]
            self.batch.add_leader_and_isr(live, tp)

    async def controlled_shutdown(self, broker: int) -> list[TP]:
        """Move leadership off `broker`, take it out of ISRs; returns the partitions it still leads."""
        ctx = self.ctx
        ctx.shutting_down.add(broker)
        mine = [
            tp for tp in ctx.partitions_on(broker) if tp[0] not in ctx.topics_to_delete and tp in ctx.leaders
        ]
        multi = [tp for tp in mine if len(ctx.assignment[tp]) > 1]
        led = [tp for tp in multi if ctx.leaders[tp].leader == broker]
        followed = [tp for tp in multi if ctx.leaders[tp].leader != broker]
        live = self.election_live()

        def elector(tp: TP, cur: PartitionState) -> Election | None:
            return controlled_shutdown_election(
                ctx.assignment.get(tp, ()), cur.isr, self.live_for(tp, live), ctx.shutting_down
            )

        # Decided on the context's states, as Kafka does; each write is conditional on the state's zkVersion,
        # so one a leader changed meanwhile (an ISR change not yet notified) fails alone and is re-read.
        # Reading all of them first cost 1,000 ZooKeeper reads (~0.3 s) before acting for 1,000 partitions.
        # The broker does not become a follower of the partitions it led (Kafka's LeaderAndIsr makes it one):
        # it would fetch until its exit and its new leaders would put it back into their ISRs, a write the
        # controller has to undo (Kafka's controller refuses it, KIP-841). It stops them as those it followed.
        moved, _ = await self.elect(led, elector, read_first=False, exclude=(broker,))
        for tp in (*moved, *followed):
            self.batch.add_stop_replica(broker, tp, delete=False)
        self.set_replica_state([(tp, broker) for tp in moved], RS.OFFLINE)
        await self.replicas_offline([(tp, broker) for tp in followed], read_first=False)
        # Still led by it, among those another live replica could take (Kafka also lists partitions with no
        # other live replica; the broker would only retry in vain, so the last broker up stops at once).
        return [
            tp
            for tp in multi
            if ctx.leaders[tp].leader == broker and any(b in live for b in ctx.assignment[tp] if b != broker)
        ]
