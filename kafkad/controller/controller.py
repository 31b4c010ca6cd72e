"""The controller: election through /controller, one serial event queue, failover from ZooKeeper.

Every broker runs a Controller object; at most one is active. Election (KafkaController.elect): if
/controller exists, follow it; else create it (ephemeral) in one multi with the setData of
/controller_epoch conditional on its zkVersion, so exactly one broker wins each epoch. The winner rebuilds a
ControllerContext from ZooKeeper (brokers, topics, assignments, partition states), sends UpdateMetadata to
everyone and LeaderAndIsr to every live replica, elects leaders for leaderless partitions, then reacts to
events.

Events (ZooKeeper watches, admin calls, ControlledShutdown requests, timers) are queued and processed one
at a time; events needing an active controller are skipped otherwise. Watches are one-shot: each handler
re-reads with a watch. SUSPENDED stops acting at once (context dropped); LOST resigns; a new session
re-elects. A ControllerMovedError from any fenced write resigns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafkad.controller.admin import new_topic_id
from kafkad.controller.channel import ControllerChannel
from kafkad.controller.context import TP, ControllerContext
from kafkad.controller.log_dir_events import LogDirEvents
from kafkad.controller.partition_ops import ControllerMovedError, PartitionOps
from kafkad.controller.reassignment import Reassignments
from kafkad.controller.state_machines import Election, PartitionStateName, ReplicaStateName, offline_election
from kafkad.controller.topic_deletion import TopicDeletions
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.zk import znodes as Z
from kafkad.zk.client import (
    ZK_CONNECTION_ERRORS,
    BadVersionError,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    SetOp,
    WatchedEvent,
    ZkClient,
    ZkState,
    session_event,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    unclean_leader_election: bool = False
    auto_leader_rebalance: bool = True
    imbalance_check_interval_s: float = 300.0
    imbalance_per_broker_percentage: int = 10
    socket_timeout_ms: int = 30000


Event = Callable[[], Awaitable[Any]]
_TIMED_EVENTS = frozenset(
    {"Startup", "Reelect", "ControllerChange", "BrokerChange", "ControlledShutdown", "TopicChange"}
)


class Controller:
    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        settings: ControllerSettings,
        topic_unclean: Callable[[str], bool | None] | None = None,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.settings = settings
        self.ctx = ControllerContext()
        self.active = False
        self.controller_id = -1
        self.channel: ControllerChannel | None = None
        self._topic_unclean = topic_unclean or (lambda _t: None)
        self.ops = PartitionOps(self.ctx, zk, broker_id, self._unclean_allowed)
        self.reassign = Reassignments(self.ops)
        self.deletions = TopicDeletions(self.ctx, zk, self.ops, self.put)
        self.log_dirs = LogDirEvents(self.ctx, zk, self.ops, self.put)  # answers of LeaderAndIsr too
        self.ops.new_batch()
        self._queue: asyncio.Queue[tuple[str, Event, bool]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self._became_active: list[Callable[[bool], None]] = []
        self.elections = 0

    def _unclean_allowed(self, topic: str) -> bool:
        v = self._topic_unclean(topic)
        return self.settings.unclean_leader_election if v is None else v

    # --- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-events")
        self.put("Startup", self._elect, active_only=False)

    async def close(self) -> None:
        self._resign("shutting down")
        for t in (self._task, self._rebalance_task):
            if t is not None:
                t.cancel()
        await asyncio.gather(*(t for t in (self._task, self._rebalance_task) if t), return_exceptions=True)

    def on_active_change(self, cb: Callable[[bool], None]) -> None:
        self._became_active.append(cb)

    def on_zk_state(self, state: ZkState, new_session: bool) -> None:
        """From ZkClient (on the loop). The broker registers again before calling this on a new session."""
        if state in (ZkState.SUSPENDED, ZkState.LOST):
            self._resign(f"ZooKeeper {state.value}")
        elif state is ZkState.CONNECTED:
            self.put("Reelect", self._elect, active_only=False)

    def put(self, name: str, event: Event, active_only: bool = True) -> None:
        self._queue.put_nowait((name, event, active_only))

    async def call(self, name: str, event: Callable[[], Awaitable[Any]]) -> Any:
        """Run `event` on the queue (only while active; NOT_CONTROLLER otherwise) and return its result."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def run() -> None:
            if not self.active:
                fut.set_exception(KafkaError(ErrorCode.NOT_CONTROLLER, "this broker is not the controller"))
                return
            try:
                fut.set_result(await event())
            except BaseException as e:
                fut.set_exception(e)
                raise

        self.put(name, run, active_only=False)
        return await fut

    async def _run(self) -> None:
        while True:
            name, event, active_only = await self._queue.get()
            if active_only and not self.active:
                continue
            started = time.perf_counter()
            try:
                await event()
                if self.active and self.channel is not None and not self.ops.batch.empty():
                    self.ops.batch.send(self.channel)
                took_ms = (time.perf_counter() - started) * 1000
                if name in _TIMED_EVENTS and self.active:
                    log.info("controller event %s took %.1f ms", name, took_ms)
            except ControllerMovedError as e:
                log.warning("controller moved while processing %s: %s", name, e)
                self._resign("controller moved")
                self.put("Reelect", self._elect, active_only=False)
            except ZK_CONNECTION_ERRORS as e:
                # The session expired (or the connection dropped) under the event: its effects may be
                # half-done, so resign (the context is dropped) and elect again, which rebuilds everything
                # from ZooKeeper: now if connected, else on_zk_state(CONNECTED) does it on the new session.
                log.warning("ZooKeeper connection lost while processing %s: %r; redone on reconnect", name, e)
                self._resign("ZooKeeper connection lost")
                if self.zk.connected:
                    self.put("Reelect", self._elect, active_only=False)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller event %s failed", name)

    # --- election --------------------------------------------------------------------------------------
    def _watch_controller(self, event: WatchedEvent) -> None:
        if session_event(event):  # kazoo dropped every watch: on_zk_state resigns and re-elects
            return
        self.put("ControllerChange", self._controller_change, active_only=False)

    async def _controller_change(self) -> None:
        got = await self.zk.get_or_none(Z.CONTROLLER, watch=self._watch_controller)
        if got is None:
            self._resign("/controller deleted")
            await self._elect()
            return
        cid = Z.ControllerZNode.decode(got[0])
        self.controller_id = cid if cid is not None else -1
        if self.active and cid != self.broker_id:
            self._resign(f"broker {cid} is the controller now")

    async def _elect(self) -> None:
        if not self.zk.connected:
            return
        while True:
            got = await self.zk.get_or_none(Z.CONTROLLER, watch=self._watch_controller)
            if got is not None:
                cid = Z.ControllerZNode.decode(got[0])
                self.controller_id = cid if cid is not None else -1
                if cid == self.broker_id and got[1].ephemeralOwner == self.zk.session_id and not self.active:
                    await self._resume_after_reconnect()
                elif cid != self.broker_id and self.active:
                    self._resign(f"broker {cid} is the controller")
                return
            epoch_data = await self.zk.get_or_none(Z.CONTROLLER_EPOCH)
            if epoch_data is None:
                with contextlib.suppress(NodeExistsError):
                    await self.zk.create(Z.CONTROLLER_EPOCH, Z.ControllerEpochZNode.encode(0))
                continue
            epoch, version = Z.ControllerEpochZNode.decode(epoch_data[0]), epoch_data[1].version
            try:
                results = await self.zk.multi(
                    [
                        CreateOp(Z.CONTROLLER, Z.ControllerZNode.encode(self.broker_id), ephemeral=True),
                        SetOp(Z.CONTROLLER_EPOCH, Z.ControllerEpochZNode.encode(epoch + 1), version),
                    ]
                )
            except (NodeExistsError, BadVersionError):
                continue  # someone else won this round: read who
            await self.zk.exists(Z.CONTROLLER, watch=self._watch_controller)
            self.ctx.reset()
            self.ctx.epoch, self.ctx.epoch_zk_version = epoch + 1, results[1].version
            self.controller_id = self.broker_id
            await self._failover()
            return

    async def _resume_after_reconnect(self) -> None:
        """Our /controller survived a connection loss (same session): act again with the same epoch."""
        got = await self.zk.get(Z.CONTROLLER_EPOCH)
        self.ctx.reset()
        self.ctx.epoch, self.ctx.epoch_zk_version = Z.ControllerEpochZNode.decode(got[0]), got[1].version
        await self._failover()

    def _resign(self, why: str) -> None:
        if not self.active:
            return
        log.warning("controller %d (epoch %d) resigns: %s", self.broker_id, self.ctx.epoch, why)
        self.active = False
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        self.ctx.reset()
        self.reassign.legacy = {}
        self.ops.new_batch()
        for cb in self._became_active:
            cb(False)

    async def _failover(self) -> None:
        """onControllerFailover: rebuild the context from ZooKeeper and tell every broker the state."""
        ctx = self.ctx
        log.info(
            "broker %d is the controller (epoch %d); loading the cluster state", self.broker_id, ctx.epoch
        )
        if self.channel is not None:  # an interrupted failover's (not active yet: _resign left it)
            self.channel.close()
        self.channel = ControllerChannel(self.broker_id, request_timeout_ms=self.settings.socket_timeout_ms)
        self.ops.new_batch()
        await self._read_brokers()
        for b in ctx.live_brokers.values():
            self.channel.add_broker(b)
        topics = await self.zk.children(Z.BROKER_TOPICS, watch=self._watch_topics)
        await asyncio.gather(*(self._read_topic(t) for t in topics))
        got = await asyncio.gather(
            *(self.zk.get_or_none(Z.PartitionStateZNode.path(*tp)) for tp in ctx.assignment)
        )
        written_at: dict[TP, int] = {}  # the zxid of each partition state's last write
        for tp, g in zip(list(ctx.assignment), got, strict=True):
            if g is not None:
                ctx.leaders[tp] = Z.PartitionStateZNode.decode(g[0], g[1].version)
                written_at[tp] = g[1].mzxid
        restarted = self._restarted_unseen(written_at)
        for tp in ctx.assignment:
            st = ctx.leaders.get(tp)
            if st is None:
                ctx.partition_states[tp] = PartitionStateName.NEW
            else:
                ctx.partition_states[tp] = (
                    PartitionStateName.ONLINE if ctx.is_live(st.leader) else PartitionStateName.OFFLINE
                )
            for r in ctx.assignment[tp]:
                ctx.replica_states[(tp, r)] = (
                    ReplicaStateName.ONLINE if ctx.is_live(r) else ReplicaStateName.OFFLINE
                )
        deleting = await self.zk.children(Z.DELETE_TOPICS, watch=self.deletions.watch)
        ctx.topics_to_delete.update(t for t in deleting if t in ctx.topics())
        self.active = True
        self.elections += 1
        for cb in self._became_active:
            cb(True)
        if restarted:  # before the first LeaderAndIsr: a restarted leader must not lead again, even briefly
            await self._restarted(restarted)
        batch = self.ops.batch
        batch.add_update_metadata(ctx.live_ids, list(ctx.leaders))
        for tp in ctx.leaders:
            if tp[0] not in ctx.topics_to_delete:
                batch.add_leader_and_isr([b for b in ctx.assignment[tp] if ctx.is_live(b)], tp)
        new = [tp for tp in ctx.assignment if tp not in ctx.leaders]
        if new:
            ctx.partition_states.update(dict.fromkeys(new, PartitionStateName.NON_EXISTENT))
            await self.ops.on_new_partitions(new)
        await self.ops.trigger_online_partitions()
        # ReplicaStateMachine.startup: replicas on dead brokers go OfflineReplica, i.e. out of the ISRs (a
        # controller that died with its broker left them there; acks=all would wait for them)
        dead = [
            (tp, b)
            for tp, reps in ctx.assignment.items()
            if tp in ctx.leaders
            for b in reps
            if not ctx.is_live(b)
        ]
        if dead:
            # The states were read from ZooKeeper in this event: no second read (1,000 gets, ~0.3 s on the
            # way to the first CreateTopics); a state a leader moved since fails its conditional write alone
            # and is re-read, and a decision to leave one alone is confirmed on a fresh read.
            await self.ops.replicas_offline(dead, read_first=False)
        await self.reassign.maybe_complete(list(ctx.reassigning))
        self.put("IsrChangeNotification", self._isr_changes)
        self.put("LogDirEventNotification", self.log_dirs.run)
        self.put("TopicDeletion", self.deletions.run)
        self.put("PreferredReplicaElection", self._preferred_znode)
        self.put("PartitionReassignment", self._reassign_znode)
        await self.zk.exists(Z.PREFERRED_REPLICA_ELECTION, watch=self._watch_preferred)
        if self.settings.auto_leader_rebalance:
            self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_timer())
        log.info(
            "controller %d ready: %d live brokers, %d topics, %d partitions",
            self.broker_id,
            len(ctx.live_brokers),
            len(ctx.topics()),
            len(ctx.assignment),
        )

    def _restarted_unseen(self, written_at: dict[TP, int]) -> dict[TP, set[int]]:
        """Partitions led by a broker that registered again after the partition state was last written:
        it restarted while no controller ran (the previous one died with it: a power loss of the controller's
        appliance), so no BrokerChange moved its leadership, and its log may have lost its tail. Left as is,
        it leads again at the same leader epoch and the followers truncate acknowledged records away to
        match it. Maps each such partition to its ISR members that restarted so (the leader among them)."""
        ctx = self.ctx
        out: dict[TP, set[int]] = {}
        for tp, zxid in written_at.items():
            st = ctx.leaders[tp]
            fresh = {b for b in st.isr if ctx.is_live(b) and ctx.live_brokers[b].epoch > zxid}
            if st.leader in fresh:
                out[tp] = fresh
        return out

    async def _restarted(self, restarted: dict[TP, set[int]]) -> None:
        """A new leader (new epoch) from the ISR members that did not restart, where there is one; the ISR
        stays as it is (a member that only looks alive, its session not expired yet - a whole rack that lost
        power - must not take the restarted broker out of the ISR: it may be all that is left)."""
        log.info(
            "%d partitions are led by brokers %s, restarted while no controller ran: electing other leaders",
            len(restarted),
            sorted(set().union(*restarted.values())),
        )

        def elector(tp: TP, cur: Z.PartitionState) -> Election | None:
            fresh = restarted.get(tp, set())
            if cur.leader not in fresh:
                return None  # moved meanwhile
            for b in self.ctx.assignment.get(tp, ()):
                if b in cur.isr and b not in fresh and self.ctx.is_live(b):
                    return Election(b, cur.isr)
            return None

        await self.ops.elect(sorted(restarted), elector)

    # --- brokers ---------------------------------------------------------------------------------------
    def _watch_brokers(self, event: WatchedEvent) -> None:
        if not session_event(event):
            self.put("BrokerChange", self._broker_change)

    async def _read_brokers(self) -> dict[int, Z.BrokerInfo]:
        ids = await self.zk.children(Z.BROKER_IDS, watch=self._watch_brokers)
        got = await asyncio.gather(*(self.zk.get_or_none(f"{Z.BROKER_IDS}/{i}") for i in ids))
        brokers = {
            int(i): Z.BrokerIdZNode.decode(int(i), g[0], g[1].czxid)
            for i, g in zip(ids, got, strict=True)
            if g
        }
        if not self.active:
            self.ctx.live_brokers = brokers
        return brokers

    async def _broker_change(self) -> None:
        ctx = self.ctx
        brokers = await self._read_brokers()
        old = ctx.live_brokers
        bounced = [b for b in brokers if b in old and brokers[b].epoch != old[b].epoch]
        dead = sorted((set(old) - set(brokers)) | set(bounced))
        new = sorted((set(brokers) - set(old)) | set(bounced))
        if not dead and not new:
            return
        log.info("brokers changed: new %s, dead %s (bounced %s)", new, dead, bounced)
        assert self.channel is not None
        for b in (*dead, *new):
            ctx.replicas_on_offline_dirs.pop(b, None)  # a restarted broker loads its logs again
        for b in dead:
            ctx.live_brokers.pop(b, None)
            ctx.shutting_down.discard(b)
            self.channel.remove_broker(b)
        if dead:
            await self.ops.on_broker_failure(dead)
        for b in new:
            ctx.live_brokers[b] = brokers[b]
            self.channel.add_broker(brokers[b])
        if new:
            await self.ops.on_broker_startup(new)
            await self.reassign.maybe_complete(list(ctx.reassigning))
            if ctx.topics_to_delete:
                self.put("TopicDeletion", self.deletions.run)

    # --- topics ----------------------------------------------------------------------------------------
    def _watch_topics(self, event: WatchedEvent) -> None:
        if not session_event(event):
            self.put("TopicChange", self._topic_change)

    def _watch_topic(self, event: WatchedEvent) -> None:
        if session_event(event):
            return
        topic = event.path.rsplit("/", 1)[-1]
        self.put("PartitionModifications", lambda: self._partition_modifications(topic))

    async def _read_topic(self, topic: str) -> list[TP]:
        got = await self.zk.get_or_none(Z.TopicZNode.path(topic), watch=self._watch_topic)
        if got is None:
            return []
        a = Z.TopicZNode.decode(got[0])
        if a.topic_id is None:
            a = await self._give_topic_id(topic, a, got[1].version)
        added = [(topic, p) for p in a.partitions if (topic, p) not in self.ctx.assignment]
        self.ctx.add_topic(topic, a.partitions, a.topic_id)
        if a.adding or a.removing:
            self.reassign.resume_from_znodes(topic, a)
        return added

    async def _give_topic_id(self, topic: str, a: Z.TopicAssignment, version: int) -> Z.TopicAssignment:
        """A topic znode without topic_id (written by an older Kafka or a tool) gets one, as Kafka's
        controller does for KIP-516 (KafkaController.setTopicIds); fenced on the controller epoch. If the
        znode changed meanwhile, its data watch reads it again."""
        with_id = a._replace(topic_id=new_topic_id())
        try:
            await self.ops.fenced([SetOp(Z.TopicZNode.path(topic), Z.TopicZNode.encode(with_id), version)])
        except BadVersionError:
            return a
        log.info("gave topic %s the id %s", topic, with_id.topic_id)
        return with_id

    async def _topic_change(self) -> None:
        ctx = self.ctx
        topics = set(await self.zk.children(Z.BROKER_TOPICS, watch=self._watch_topics))
        for gone in ctx.topics() - topics:
            ctx.remove_topic(gone)
        added: list[TP] = []
        for t in sorted(topics - ctx.topics()):
            added += await self._read_topic(t)
        if added:
            log.info("new topic partitions: %d", len(added))
            await self.ops.on_new_partitions(added)

    async def _partition_modifications(self, topic: str) -> None:
        if topic not in self.ctx.topics():
            return
        added = await self._read_topic(topic)
        if added:
            await self.ops.on_new_partitions(added)

    # --- ISR change notifications -------------------------------------------------------------------------
    def _watch_isr(self, event: WatchedEvent) -> None:
        if not session_event(event):
            self.put("IsrChangeNotification", self._isr_changes)

    async def _isr_changes(self) -> None:
        notes = await self.ops.take_notifications(Z.ISR_CHANGE_NOTIFICATION, self._watch_isr)
        if not notes:
            return
        changed: set[TP] = set()
        for data in notes:
            changed.update(Z.IsrChangeNotificationZNode.decode(data))
        changed &= set(self.ctx.assignment)
        states = await asyncio.gather(*(self.ops.read_state(tp) for tp in changed))
        for tp, st in zip(list(changed), states, strict=True):
            if st is not None:
                self.ctx.leaders[tp] = st
        log.info("ISR changed for %d partitions (%d notifications)", len(changed), len(notes))
        await self._drop_ineligible(changed)
        self.ops.batch.add_update_metadata(self.ctx.live_ids, changed)
        await self.reassign.maybe_complete(changed & set(self.ctx.reassigning))

    async def _drop_ineligible(self, tps: set[TP]) -> None:
        """A leader's ISR expansion may name a broker that is gone or in controlled shutdown: it fetched once
        more before its StopReplica or its exit, and the controller's removal (decided before the expansion
        reached it) had nothing to remove. Such a follower leaves the ISR again (OfflineReplica; a stopping
        one also gets its StopReplica), or acks=all would wait for it until replica.lag.time.max.ms (Kafka's
        controller refuses such an expansion: ineligible replicas, KIP-841)."""
        ctx = self.ctx
        stray = [
            (tp, b)
            for tp in sorted(tps)
            if (st := ctx.leaders.get(tp)) is not None and st.leader >= 0
            for b in st.isr
            if b != st.leader and (not ctx.is_live(b) or b in ctx.shutting_down)
        ]
        if not stray:
            return
        log.info("taking %d gone or stopping replicas out of ISRs again: %s", len(stray), stray[:10])
        for tp, b in stray:
            self.ops.batch.add_stop_replica(b, tp, delete=False)  # nothing for a gone broker
        await self.ops.replicas_offline(stray, read_first=False)

    # --- reassignment -------------------------------------------------------------------------------------
    async def alter_reassignments(self, moves: dict[TP, list[int] | None]) -> dict[TP, ErrorCode]:
        result: dict[TP, ErrorCode] = await self.call(
            "AlterPartitionReassignment", lambda: self.reassign.alter(moves)
        )
        return result

    def _watch_reassign(self, event: WatchedEvent) -> None:
        if not session_event(event):
            self.put("PartitionReassignment", self._reassign_znode)

    async def _reassign_znode(self) -> None:
        while True:
            got = await self.zk.get_or_none(Z.REASSIGN_PARTITIONS, watch=self._watch_reassign)
            if got is not None:
                break
            if await self.zk.exists(Z.REASSIGN_PARTITIONS, watch=self._watch_reassign) is None:
                return
            # Created between the two reads: the exists watch is now a data watch that fires only at the
            # znode's next change (maybe never), so read it now instead of waiting for that.
        moves = Z.ReassignPartitionsZNode.decode(got[0])
        if moves != self.reassign.legacy:
            await self.reassign.from_znode(moves)

    # --- controlled shutdown ------------------------------------------------------------------------------
    async def controlled_shutdown(self, broker: int, broker_epoch: int) -> list[TP]:
        async def run() -> list[TP]:
            ctx = self.ctx
            if not ctx.is_live(broker):
                raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker} is not alive")
            if broker_epoch != -1 and broker_epoch < ctx.broker_epoch(broker):
                raise KafkaError(ErrorCode.STALE_BROKER_EPOCH, f"broker epoch {broker_epoch} is stale")
            remaining = await self.ops.controlled_shutdown(broker)
            log.info(
                "controlled shutdown of broker %d: %d partitions remain led by it", broker, len(remaining)
            )
            return remaining

        result: list[TP] = await self.call("ControlledShutdown", run)
        return result

    # --- preferred leader election ------------------------------------------------------------------------
    async def elect_preferred(self, tps: Sequence[TP] | None) -> dict[TP, ErrorCode]:
        async def run() -> dict[TP, ErrorCode]:
            ctx = self.ctx
            wanted = list(ctx.leaders) if tps is None else list(tps)
            out: dict[TP, ErrorCode] = {}
            known = [tp for tp in wanted if tp in ctx.leaders]
            for tp in wanted:
                if tp not in ctx.leaders:
                    out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            already = [tp for tp in known if ctx.assignment[tp][0] == ctx.leaders[tp].leader]
            for tp in already:
                out[tp] = ErrorCode.ELECTION_NOT_NEEDED
            written, failed = await self.ops.preferred([tp for tp in known if tp not in already])
            for tp in written:
                out[tp] = ErrorCode.NONE
            for tp in failed:
                out[tp] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            return out

        result: dict[TP, ErrorCode] = await self.call("PreferredLeaderElection", run)
        return result

    async def elect_unclean(self, tps: Sequence[TP] | None) -> dict[TP, ErrorCode]:
        """ElectLeaders UNCLEAN: partitions without a live leader get one, from outside the ISR if need be."""

        async def run() -> dict[TP, ErrorCode]:
            ctx = self.ctx
            live = self.ops.election_live()
            wanted = list(ctx.leaders) if tps is None else list(tps)
            out = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in wanted if tp not in ctx.leaders}
            todo = [
                tp
                for tp in wanted
                if tp in ctx.leaders and ctx.leaders[tp].leader not in self.ops.live_for(tp, live)
            ]
            out.update(
                {tp: ErrorCode.ELECTION_NOT_NEEDED for tp in wanted if tp in ctx.leaders and tp not in todo}
            )

            def elector(tp: TP, cur: Z.PartitionState) -> Election | None:
                return offline_election(
                    ctx.assignment.get(tp, ()), cur.isr, self.ops.live_for(tp, live), True
                )

            written, failed = await self.ops.elect(todo, elector)
            out.update(dict.fromkeys(written, ErrorCode.NONE))
            out.update(dict.fromkeys(failed, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE))
            return out

        result: dict[TP, ErrorCode] = await self.call("UncleanLeaderElection", run)
        return result

    def _watch_preferred(self, event: WatchedEvent) -> None:
        if not session_event(event):
            self.put("PreferredReplicaElection", self._preferred_znode)
            self.put("PartitionReassignment", self._reassign_znode)

    async def _preferred_znode(self) -> None:
        got = await self.zk.get_or_none(Z.PREFERRED_REPLICA_ELECTION, watch=self._watch_preferred)
        if got is None:
            return
        tps = [tp for tp in Z.PreferredReplicaElectionZNode.decode(got[0]) if tp in self.ctx.leaders]
        written, failed = await self.ops.preferred(tps)
        log.info("preferred replica election: %d moved, %d not possible", len(written), len(failed))
        with contextlib.suppress(NoNodeError):
            await self.ops.fenced([DeleteOp(Z.PREFERRED_REPLICA_ELECTION)])
        await self.zk.exists(Z.PREFERRED_REPLICA_ELECTION, watch=self._watch_preferred)

    async def _rebalance_timer(self) -> None:
        while True:
            await asyncio.sleep(self.settings.imbalance_check_interval_s)
            self.put("AutoPreferredReplicaLeaderElection", self._auto_rebalance)

    async def _auto_rebalance(self) -> None:
        """checkAndTriggerAutoLeaderRebalance: per preferred broker, if more than the allowed share of its
        partitions is led by someone else, elect it back where it is live and in the ISR."""
        ctx = self.ctx
        by_pref: dict[int, list[TP]] = {}
        for tp, reps in ctx.assignment.items():
            if reps and tp in ctx.leaders and tp[0] not in ctx.topics_to_delete:
                by_pref.setdefault(reps[0], []).append(tp)
        todo: list[TP] = []
        for b, tps in by_pref.items():
            if not ctx.is_live(b) or b in ctx.shutting_down:
                continue
            off = [tp for tp in tps if ctx.leaders[tp].leader != b]
            if off and 100 * len(off) / len(tps) > self.settings.imbalance_per_broker_percentage:
                todo += off
        if todo:
            written, _ = await self.ops.preferred(todo)
            if written:
                log.info("auto leader rebalance moved %d partitions to their preferred leaders", len(written))
