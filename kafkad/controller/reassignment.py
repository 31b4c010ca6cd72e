"""Partition reassignment as Kafka's controller does it (KIP-455), driven by the controller's events.

For a partition with original replicas ORS moving to target replicas TRS:
1. start: the topic znode gets RS = TRS + ORS (order kept, no duplicates) with adding = TRS - ORS and
   removing = ORS - TRS; the leader epoch is bumped and LeaderAndIsr goes to every live replica of RS, so the
   adding replicas create their logs and start following.
2. complete, once every TRS replica is in the ISR (checked at start, on each ISR change notification and on
   broker startup): a leader outside TRS (or dead) is replaced by the first live TRS member of the ISR, the
   removing replicas leave the ISR (one state write, epoch + 1), the topic znode gets TRS with no
   adding/removing, LeaderAndIsr to TRS, StopReplica(delete) to the removed replicas, UpdateMetadata to all.
A new target for a partition already moving restarts from its original replicas; cancelling (None) moves it
back to them. A controller failover resumes reassignments from the adding/removing replicas in the topic
znodes. Every ZooKeeper write is fenced (PartitionOps.fenced).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from kafkad.controller.context import TP, ControllerContext
from kafkad.controller.partition_ops import PartitionOps
from kafkad.controller.state_machines import reassign_election
from kafkad.protocol.errors import ErrorCode
from kafkad.zk import znodes as Z
from kafkad.zk.client import DeleteOp, NoNodeError, SetOp

log = logging.getLogger(__name__)


class Reassignments:
    def __init__(self, ops: PartitionOps) -> None:
        self.ops = ops
        # moves asked through /admin/reassign_partitions (Kafka < 2.4 tools, zkCli): removed from the
        # znode as they complete, the znode deleted when none is left (ZkReassignPartitionsHandler)
        self.legacy: dict[TP, tuple[int, ...]] = {}

    @property
    def ctx(self) -> ControllerContext:
        return self.ops.ctx

    # --- the topic znode ----------------------------------------------------------------------------
    async def _write_topic(
        self, topic: str, changes: Mapping[int, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]
    ) -> None:
        """partition -> (replicas, adding, removing), written into /brokers/topics/<topic> (fenced)."""
        path = Z.TopicZNode.path(topic)
        data, stat = await self.ops.zk.get(path)
        a = Z.TopicZNode.decode(data)
        parts, adding, removing = dict(a.partitions), dict(a.adding), dict(a.removing)
        for p, (reps, add, rem) in changes.items():
            parts[p] = reps
            for m, v in ((adding, add), (removing, rem)):
                if v:
                    m[p] = v
                else:
                    m.pop(p, None)
        new = a._replace(partitions=parts, adding=adding, removing=removing)
        await self.ops.fenced([SetOp(path, Z.TopicZNode.encode(new), stat.version)])
        for p, (reps, _, _) in changes.items():
            self.ctx.assignment[(topic, p)] = reps

    # --- API ----------------------------------------------------------------------------------------
    async def alter(self, moves: Mapping[TP, Sequence[int] | None]) -> dict[TP, ErrorCode]:
        ctx = self.ctx
        out: dict[TP, ErrorCode] = {}
        for tp, target in moves.items():
            if tp not in ctx.assignment or tp[0] in ctx.topics_to_delete:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            original = self.original(tp)
            if target is None:
                if tp not in ctx.reassigning:
                    out[tp] = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
                    continue
                target = original
            trs = tuple(int(b) for b in target)
            if not trs or len(set(trs)) != len(trs) or any(not ctx.is_live(b) for b in trs):
                out[tp] = ErrorCode.INVALID_REPLICA_ASSIGNMENT
                continue
            await self.start(tp, trs, original)
            out[tp] = ErrorCode.NONE
        return out

    def original(self, tp: TP) -> tuple[int, ...]:
        """The replicas before any reassignment in flight (ORS = RS - adding)."""
        adding = self.ctx.reassigning[tp][1] if tp in self.ctx.reassigning else ()
        return tuple(b for b in self.ctx.assignment[tp] if b not in adding)

    def listing(
        self, tps: Iterable[TP] | None
    ) -> dict[TP, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        ctx = self.ctx
        keys = ctx.reassigning if tps is None else [tp for tp in tps if tp in ctx.reassigning]
        return {tp: (ctx.assignment[tp], ctx.reassigning[tp][1], ctx.reassigning[tp][2]) for tp in keys}

    # --- phases -------------------------------------------------------------------------------------
    async def start(self, tp: TP, target: tuple[int, ...], original: tuple[int, ...]) -> None:
        ctx = self.ctx
        if target == tuple(ctx.assignment[tp]) and tp not in ctx.reassigning:
            return
        rs = tuple(dict.fromkeys((*target, *original)))
        adding = tuple(b for b in target if b not in original)
        removing = tuple(b for b in original if b not in target)
        log.info("reassigning %s-%d from %s to %s", tp[0], tp[1], list(original), list(target))
        await self._write_topic(tp[0], {tp[1]: (rs, adding, removing)})
        ctx.reassigning[tp] = (target, adding, removing)
        written = await self.ops.update_states(
            [tp], lambda _tp, cur: cur._replace(leader_epoch=cur.leader_epoch + 1)
        )
        if tp in written:
            self.ops.batch.add_leader_and_isr([b for b in rs if ctx.is_live(b)], tp, is_new=False)
        await self.maybe_complete([tp])

    async def maybe_complete(self, tps: Iterable[TP]) -> None:
        ctx = self.ctx
        for tp in [tp for tp in tps if tp in ctx.reassigning]:
            target, _, removing = ctx.reassigning[tp]
            fresh = await self.ops.read_state(tp)
            if fresh is None:
                continue
            ctx.leaders[tp] = fresh
            if not set(target) <= set(fresh.isr):
                continue
            await self._complete(tp, target, removing)

    async def _complete(self, tp: TP, target: tuple[int, ...], removing: tuple[int, ...]) -> None:
        ctx = self.ctx
        live = self.ops.election_live()

        def change(_tp: TP, cur: Z.PartitionState) -> Z.PartitionState | None:
            leader = cur.leader
            if leader not in target or leader not in live:
                e = reassign_election(target, cur.isr, live)
                if e is None:
                    return None
                leader = e.leader
            isr = tuple(b for b in cur.isr if b not in removing) or (leader,)
            return Z.PartitionState(leader, cur.leader_epoch + 1, isr, ctx.epoch, cur.zk_version)

        written = await self.ops.update_states([tp], change)
        if tp not in written:
            log.warning("reassignment of %s-%d waits: no live in-sync target replica to lead", *tp)
            return
        await self._write_topic(tp[0], {tp[1]: (target, (), ())})
        del ctx.reassigning[tp]
        self.ops.batch.add_leader_and_isr([b for b in target if ctx.is_live(b)], tp)
        for b in removing:
            ctx.replica_states.pop((tp, b), None)
            self.ops.batch.add_stop_replica(b, tp, delete=True)
        log.info("reassignment of %s-%d done: replicas %s", tp[0], tp[1], list(target))
        if tp in self.legacy:
            await self.prune_legacy()

    async def from_znode(self, moves: Mapping[TP, tuple[int, ...]]) -> None:
        """/admin/reassign_partitions was written: start what is not already moving to that target."""
        ctx = self.ctx
        self.legacy = dict(moves)
        fresh = {
            tp: t for tp, t in moves.items() if not (tp in ctx.reassigning and ctx.reassigning[tp][0] == t)
        }
        for tp, code in (await self.alter(fresh)).items():
            if code != ErrorCode.NONE:
                log.warning(
                    "reassignment of %s-%d from %s refused: %s",
                    tp[0],
                    tp[1],
                    Z.REASSIGN_PARTITIONS,
                    code.name,
                )
                self.legacy.pop(tp, None)
        await self.prune_legacy()

    async def prune_legacy(self) -> None:
        left = {tp: t for tp, t in self.legacy.items() if tp in self.ctx.reassigning}
        if left == self.legacy and left:
            return
        self.legacy = left
        try:
            if left:
                await self.ops.fenced([SetOp(Z.REASSIGN_PARTITIONS, Z.ReassignPartitionsZNode.encode(left))])
            else:
                await self.ops.fenced([DeleteOp(Z.REASSIGN_PARTITIONS)])
        except NoNodeError:
            pass

    def resume_from_znodes(self, topic: str, a: Z.TopicAssignment) -> list[TP]:
        """On failover: partitions whose topic znode records adding/removing replicas are still moving."""
        moving = []
        for p in set(a.adding) | set(a.removing):
            reps = a.partitions.get(p, ())
            removing = tuple(a.removing.get(p, ()))
            target = tuple(b for b in reps if b not in removing)
            self.ctx.reassigning[(topic, p)] = (target, tuple(a.adding.get(p, ())), removing)
            moving.append((topic, p))
        return moving
