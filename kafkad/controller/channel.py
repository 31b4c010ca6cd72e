"""Controller -> broker requests: per-broker ordered queues (ControllerChannelManager) and the batch builder
(ControllerBrokerRequestBatch).

Each live broker gets one BrokerChannel (kafkad.replication.broker_channel) and one sender task that sends
its queued requests one at a time, in order, retrying a failed send with a short backoff until it gets an
answer or the broker is removed (Kafka's RequestSendThread). A RequestBatch collects LeaderAndIsr,
UpdateMetadata and StopReplica entries while an event is processed and turns them into at most one request
of each kind per broker, stamped with the controller epoch and the receiving broker's epoch.

Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kafkad.controller.context import TP, ControllerContext
from kafkad.protocol import ApiKey
from kafkad.zk.znodes import BrokerInfo, PartitionState

log = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
RETRY_BACKOFF_S = 0.1

Callback = Callable[[int, dict[str, Any] | None], None]


def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """/brokers/topics' base64 topic id as the wire's UUID (zero when unknown)."""
    if not topic_id:
        return uuid.UUID(int=0)
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))
    except ValueError:
        return uuid.UUID(int=0)


class _Queued:
    __slots__ = ("api_key", "body", "callback", "version")

    def __init__(self, api_key: int, version: int, body: dict[str, Any], callback: Callback | None) -> None:
        self.api_key, self.version, self.body, self.callback = api_key, version, body, callback


_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol ids


class _BrokerSender:
    def __init__(self, info: BrokerInfo, client_id: str, timeout_ms: int) -> None:
        from kafkad.replication.broker_channel import BrokerChannel

        self.info = info
        self.channel = BrokerChannel(info.host, info.port, client_id=client_id, request_timeout_ms=timeout_ms)
        self.queue: asyncio.Queue[_Queued] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-send-{info.broker_id}"
        )

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            while True:
                try:
                    resp = await self.channel.request(item.api_key, item.version, item.body)
                    break
                except (TimeoutError, ConnectionError, OSError) as e:
                    log.debug(
                        "controller request %s to broker %d failed: %s", item.api_key, self.info.broker_id, e
                    )
                    await asyncio.sleep(RETRY_BACKOFF_S)
            if item.callback is not None:
                try:
                    item.callback(self.info.broker_id, resp)
                except Exception:
                    log.exception("controller response callback failed")

    def close(self) -> None:
        self.task.cancel()
        self.channel.close()


class ControllerChannel:
    def __init__(self, controller_id: int, *, request_timeout_ms: int = 30000) -> None:
        self.controller_id = controller_id
        self._timeout_ms = request_timeout_ms
        self._senders: dict[int, _BrokerSender] = {}

    def add_broker(self, info: BrokerInfo) -> None:
        old = self._senders.get(info.broker_id)
        if old is not None:
            if (old.info.host, old.info.port) == (info.host, info.port):
                old.info = info
                return
            old.close()
        self._senders[info.broker_id] = _BrokerSender(
            info, f"controller-{self.controller_id}", self._timeout_ms
        )

    def remove_broker(self, broker_id: int) -> None:
        s = self._senders.pop(broker_id, None)
        if s is not None:
            s.close()

    def brokers(self) -> set[int]:
        return set(self._senders)

    def send(
        self,
        broker_id: int,
        api_key: int,
        version: int,
        body: dict[str, Any],
        callback: Callback | None = None,
    ) -> None:
        s = self._senders.get(broker_id)
        if s is None:
            log.debug("no channel to broker %d; request %d dropped", broker_id, api_key)
            return
        s.queue.put_nowait(_Queued(api_key, version, body, callback))

    def idle(self) -> bool:
        return all(s.queue.empty() for s in self._senders.values())

    def close(self) -> None:
        for s in self._senders.values():
            s.close()
        self._senders.clear()


def _lai_partition(tp: TP, st: PartitionState, replicas: Iterable[int], is_new: bool) -> dict[str, Any]:
    return {
        "topic_name": tp[0],
        "partition_index": tp[1],
        "controller_epoch": st.controller_epoch,
        "leader": st.leader,
        "leader_epoch": st.leader_epoch,
        "isr": list(st.isr),
        "partition_epoch": st.zk_version,
        "replicas": list(replicas),
        "adding_replicas": [],
        "removing_replicas": [],
        "is_new": is_new,
    }


class RequestBatch:
    """Collects the requests one controller event causes; `send` queues them on the channel."""

    def __init__(
        self, ctx: ControllerContext, controller_id: int, on_leader_and_isr: Callback | None = None
    ) -> None:
        self.ctx = ctx
        self.controller_id = controller_id
        self.on_leader_and_isr = on_leader_and_isr  # every LeaderAndIsr answer (per-partition errors)
        self._lai: dict[int, dict[TP, dict[str, Any]]] = {}
        self._um_brokers: set[int] = set()
        self._um_partitions: set[TP] = set()
        self._um_deleted: set[TP] = set()
        self._stop: dict[int, dict[TP, tuple[bool, int]]] = {}
        self._stop_callbacks: dict[int, Callback] = {}

    def add_leader_and_isr(self, brokers: Iterable[int], tp: TP, is_new: bool = False) -> None:
        st = self.ctx.leaders.get(tp)
        if st is None:
            return
        reps = self.ctx.assignment.get(tp, ())
        for b in brokers:
            if self.ctx.is_live(b):
                self._lai.setdefault(b, {})[tp] = _lai_partition(tp, st, reps, is_new)
        self.add_update_metadata(self.ctx.live_ids, [tp])

    def add_update_metadata(self, brokers: Iterable[int], tps: Iterable[TP], deleted: bool = False) -> None:
        self._um_brokers.update(b for b in brokers if self.ctx.is_live(b))
        (self._um_deleted if deleted else self._um_partitions).update(tps)

    def add_stop_replica(self, broker: int, tp: TP, delete: bool, callback: Callback | None = None) -> None:
        if not self.ctx.is_live(broker):
            return
        st = self.ctx.leaders.get(tp)
        epoch = EPOCH_DURING_DELETE if delete else (st.leader_epoch if st else -1)
        self._stop.setdefault(broker, {})[tp] = (delete, epoch)
        if callback is not None:
            self._stop_callbacks[broker] = callback

    def empty(self) -> bool:
        return not (self._lai or self._um_brokers or self._stop)

    def send(self, channel: ControllerChannel) -> None:
        ctx = self.ctx
        for b, parts in self._lai.items():
            channel.send(
                b,
                ApiKey.LEADER_AND_ISR,
                LEADER_AND_ISR_VERSION,
                self._lai_body(b, parts),
                self.on_leader_and_isr,
            )
        if self._um_brokers:
            states = self._um_states()
            for b in sorted(self._um_brokers):
                channel.send(b, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, self._um_body(b, states))
        for b, stops in self._stop.items():
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for (t, p), (delete, epoch) in sorted(stops.items()):
                by_topic.setdefault(t, []).append(
                    {"partition_index": p, "leader_epoch": epoch, "delete_partition": delete}
                )
            body = {
                "controller_id": self.controller_id,
                "controller_epoch": ctx.epoch,
                "broker_epoch": ctx.broker_epoch(b),
                "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in by_topic.items()],
            }
            channel.send(b, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, body, self._stop_callbacks.get(b))
        self.__init__(ctx, self.controller_id, self.on_leader_and_isr)  # type: ignore[misc]

    def _lai_body(self, broker: int, parts: dict[TP, dict[str, Any]]) -> dict[str, Any]:
        ctx = self.ctx
        by_topic: dict[str, list[dict[str, Any]]] = {}
        leaders: set[int] = set()
        for (t, _), ps in sorted(parts.items()):
            by_topic.setdefault(t, []).append(ps)
            leaders.add(ps["leader"])
        return {
            "controller_id": self.controller_id,
            "controller_epoch": ctx.epoch,
            "broker_epoch": ctx.broker_epoch(broker),
            "type": 0,
            "topic_states": [
                {"topic_name": t, "topic_id": topic_uuid(ctx.topic_ids.get(t)), "partition_states": ps}
                for t, ps in by_topic.items()
            ],
            "live_leaders": [
                {"broker_id": b.broker_id, "host_name": b.host, "port": b.port}
                for lid in sorted(leaders)
                if (b := ctx.live_brokers.get(lid)) is not None
            ],
        }

    def _um_states(self) -> list[dict[str, Any]]:
        ctx = self.ctx
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in sorted(self._um_partitions | self._um_deleted):
            st = ctx.leaders.get(tp)
            if st is None:
                continue
            leader = LEADER_DURING_DELETE if tp in self._um_deleted else st.leader
            by_topic.setdefault(tp[0], []).append(
                {
                    "topic_name": tp[0],
                    "partition_index": tp[1],
                    "controller_epoch": st.controller_epoch,
                    "leader": leader,
                    "leader_epoch": st.leader_epoch,
                    "isr": list(st.isr),
                    "zk_version": st.zk_version,
                    "replicas": list(ctx.assignment.get(tp, ())),
                    "offline_replicas": ctx.offline_replicas(tp),
                }
            )
        return [
            {"topic_name": t, "topic_id": topic_uuid(ctx.topic_ids.get(t)), "partition_states": ps}
            for t, ps in by_topic.items()
        ]

    def _um_body(self, broker: int, states: list[dict[str, Any]]) -> dict[str, Any]:
        ctx = self.ctx
        return {
            "controller_id": self.controller_id,
            "controller_epoch": ctx.epoch,
            "broker_epoch": ctx.broker_epoch(broker),
            "topic_states": states,
            "live_brokers": [
                {
                    "id": b.broker_id,
                    "endpoints": [
                        {
                            "port": port,
                            "host": host,
                            "listener": name,
                            "security_protocol": _PROTOCOL_IDS.get(proto, 0),
                        }
                        for name, host, port, proto in ((b.listener, b.host, b.port, b.protocol), *b.others)
                    ],
                    "rack": b.rack,
                }
                for b in sorted(ctx.live_brokers.values())
            ],
        }
