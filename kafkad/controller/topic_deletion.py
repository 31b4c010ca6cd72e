"""Topic deletion (Kafka's TopicDeletionManager, simplified), run from the controller's event queue.

/admin/delete_topics/<t> marks a topic; once every replica's broker is live, the controller sends
UpdateMetadata with the partitions' leader -2 (deleted) to everyone and StopReplica(delete) to every
replica; when every replica answered, the topic's znodes go (in one fenced multi where possible). A mark
for a topic that does not exist is just removed. Deletion of a topic with replicas on dead brokers waits
for them (a broker coming back queues TopicDeletion again).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kafkad.controller.context import ControllerContext
from kafkad.controller.partition_ops import PartitionOps
from kafkad.controller.state_machines import ReplicaStateName
from kafkad.zk import znodes as Z
from kafkad.zk.client import DeleteOp, NoNodeError, WatchedEvent, ZkClient, session_event

log = logging.getLogger(__name__)

Put = Callable[[str, Callable[[], Awaitable[Any]]], None]


class TopicDeletions:
    """Runs inside the controller's event processing, one event at a time (no locks)."""

    def __init__(self, ctx: ControllerContext, zk: ZkClient, ops: PartitionOps, put: Put) -> None:
        self.ctx, self.zk, self.ops, self.put = ctx, zk, ops, put

    def watch(self, event: WatchedEvent) -> None:
        if not session_event(event):  # kazoo dropped the watch: the next failover sets it again
            self.put("TopicDeletion", self.run)

    async def run(self) -> None:
        ctx = self.ctx
        marked = set(await self.zk.children(Z.DELETE_TOPICS, watch=self.watch))
        for t in sorted(marked - ctx.topics()):
            with contextlib.suppress(NoNodeError):
                await self.ops.fenced([DeleteOp(Z.DeleteTopicZNode.path(t))])
        ctx.topics_to_delete.update(marked & ctx.topics())
        for t in sorted(ctx.topics_to_delete):
            await self._delete_topic(t)

    async def _delete_topic(self, topic: str) -> None:
        ctx = self.ctx
        tps = ctx.partitions_of(topic)
        replicas = [(tp, b) for tp in tps for b in ctx.assignment[tp]]
        if any(not ctx.is_live(b) for _, b in replicas):
            log.info("deletion of %s waits for replicas on dead brokers", topic)
            return
        self.ops.batch.add_update_metadata(ctx.live_ids, tps, deleted=True)
        pending = {b for _, b in replicas}
        for tp, b in replicas:
            ctx.replica_states[(tp, b)] = ReplicaStateName.DELETION_STARTED

        def answered(broker: int, _resp: dict[str, Any] | None) -> None:
            pending.discard(broker)
            if not pending:
                self.put("TopicDeletionDone", lambda: self._finish(topic))

        for tp, b in replicas:
            self.ops.batch.add_stop_replica(b, tp, delete=True, callback=answered)

    async def _finish(self, topic: str) -> None:
        ctx = self.ctx
        if topic not in ctx.topics_to_delete:
            return
        tps = ctx.partitions_of(topic)
        for tp in tps:
            await self.zk.delete_recursive(Z.PartitionStateZNode.path(*tp).rsplit("/", 1)[0])
        await self.zk.delete_recursive(f"{Z.TopicZNode.path(topic)}/partitions")
        ops = [DeleteOp(Z.TopicZNode.path(topic)), DeleteOp(Z.DeleteTopicZNode.path(topic))]
        if await self.zk.exists(Z.TopicConfigZNode.path(topic)) is not None:
            ops.append(DeleteOp(Z.TopicConfigZNode.path(topic)))
        try:
            await self.ops.fenced(ops)
        except NoNodeError:
            await self.zk.delete_recursive(Z.TopicZNode.path(topic))
            await self.zk.delete_recursive(Z.DeleteTopicZNode.path(topic))
        ctx.remove_topic(topic)
        log.info("topic %s deleted", topic)
