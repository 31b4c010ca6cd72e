"""Offline replicas reach the controller, as in Kafka (KIP-112): log dir event notifications and
KAFKA_STORAGE_ERROR in LeaderAndIsr answers.

A broker whose partition's log fails (storage's log_offline) writes a persistent sequential
/log_dir_event_notification/log_dir_event_<seq> = {"version":1,"broker":<id>,"event":1}. The controller
watches the children (LogDirEventNotification event), deletes the notifications it read (fenced on its
epoch) and sends LeaderAndIsr for every replica of the named live brokers (Kafka's onBrokerLogDirFailure:
OnlineReplica for all of them). Each LeaderAndIsr answer (LeaderAndIsrResponseReceived) updates the context's
replicas_on_offline_dirs for the answering broker: KAFKA_STORAGE_ERROR marks a replica offline, NONE online
again; replicas newly offline go through onReplicasBecomeOffline (PartitionOps.on_replicas_offline: a new
leader from the ISR where one led, out of the ISR elsewhere, listed in UpdateMetadata's offline_replicas).

Runs inside the controller's event processing, one event at a time (no locks); the channel's answer
callback only queues an event.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kafkad.controller.channel import topic_uuid
from kafkad.controller.context import TP, ControllerContext
from kafkad.controller.partition_ops import PartitionOps
from kafkad.protocol.errors import ErrorCode
from kafkad.zk import znodes as Z
from kafkad.zk.client import WatchedEvent, ZkClient, session_event

log = logging.getLogger(__name__)

Put = Callable[[str, Callable[[], Awaitable[Any]]], None]


class LogDirEvents:
    def __init__(self, ctx: ControllerContext, zk: ZkClient, ops: PartitionOps, put: Put) -> None:
        self.ctx, self.zk, self.ops, self.put = ctx, zk, ops, put
        ops.on_leader_and_isr = self.on_leader_and_isr

    # --- /log_dir_event_notification ------------------------------------------------------------------
    def watch(self, event: WatchedEvent) -> None:
        if not session_event(event):  # kazoo dropped the watch: the next failover sets it again
            self.put("LogDirEventNotification", self.run)

    async def run(self) -> None:
        notes = await self.ops.take_notifications(Z.LOG_DIR_EVENT_NOTIFICATION, self.watch)
        if not notes:
            return
        brokers: set[int] = set()
        for data in notes:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                brokers.add(Z.LogDirEventNotificationZNode.decode(data))
        ctx = self.ctx
        live = sorted(b for b in brokers if ctx.is_live(b))
        log.info(
            "log dir failure on brokers %s (%d notifications): asking for their replicas' state",
            live,
            len(notes),
        )
        for b in live:
            for tp in ctx.partitions_on(b):
                if tp in ctx.leaders and tp[0] not in ctx.topics_to_delete:
                    self.ops.batch.add_leader_and_isr([b], tp)

    # --- LeaderAndIsr answers ---------------------------------------------------------------------------
    def on_leader_and_isr(self, broker: int, resp: dict[str, Any] | None) -> None:
        """The channel's callback (on the loop, outside the event queue): queue the answer's handling."""
        if resp is not None:
            self.put("LeaderAndIsrResponseReceived", lambda: self.answered(broker, resp))

    async def answered(self, broker: int, resp: dict[str, Any]) -> None:
        ctx = self.ctx
        if resp.get("error_code"):
            log.warning("LeaderAndIsr to broker %d failed: error %d", broker, resp["error_code"])
            return
        if not ctx.is_live(broker):
            return
        offline, online = _partition_errors(resp, ctx)
        prev = ctx.replicas_on_offline_dirs.get(broker, set())
        cur = (prev - online) | offline
        if cur:
            ctx.replicas_on_offline_dirs[broker] = cur
        else:
            ctx.replicas_on_offline_dirs.pop(broker, None)
        new = sorted(tp for tp in cur - prev if tp in ctx.assignment)
        if not new:
            return
        log.info("marking %d replicas on broker %d offline: %s", len(new), broker, new[:10])
        await self.ops.on_replicas_offline([(tp, broker) for tp in new])
        self.ops.batch.add_update_metadata(ctx.live_ids, [tp for tp in new if tp in ctx.leaders])


def _partition_errors(resp: dict[str, Any], ctx: ControllerContext) -> tuple[set[TP], set[TP]]:
    """(KAFKA_STORAGE_ERROR partitions, NONE partitions) of a LeaderAndIsr answer (v5: by topic id)."""
    names = {topic_uuid(tid): t for t, tid in ctx.topic_ids.items()}
    errors: list[tuple[TP, int]] = [
        ((pe["topic_name"], pe["partition_index"]), pe["error_code"])
        for pe in resp.get("partition_errors") or ()
    ]
    for t in resp.get("topics") or ():
        name = names.get(t.get("topic_id"))
        if name is not None:
            errors += [
                ((name, pe["partition_index"]), pe["error_code"]) for pe in t.get("partition_errors") or ()
            ]
    offline = {tp for tp, code in errors if code == ErrorCode.KAFKA_STORAGE_ERROR}
    online = {tp for tp, code in errors if code == ErrorCode.NONE}
    return offline, online
