"""Offline replicas reach the controller (KIP-112): /log_dir_event_notification and KAFKA_STORAGE_ERROR
answers to LeaderAndIsr, driven with FakeZk and a channel that records what the controller sends."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from kafkad.controller.channel import Callback, topic_uuid
from kafkad.controller.controller import Controller, ControllerSettings
from kafkad.protocol import ApiKey, ErrorCode
from kafkad.zk import znodes as Z
from tests.unit.election.fake_zk import FakeZk
from tests.unit.election.test_controller_session import _until

TOPIC_ID = base64.urlsafe_b64encode(bytes(range(16))).decode().rstrip("=")


class _Channel:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, dict[str, Any], Callback | None]] = []

    def send(self, b: int, api: int, _v: int, body: dict[str, Any], cb: Callback | None = None) -> None:
        self.sent.append((b, api, body, cb))

    def close(self) -> None:
        pass

    def lai_partitions(self, broker: int) -> set[tuple[str, int]]:
        return {
            (t["topic_name"], ps["partition_index"])
            for b, api, body, _ in self.sent
            if b == broker and api == ApiKey.LEADER_AND_ISR
            for t in body["topic_states"]
            for ps in t["partition_states"]
        }


async def _setup(
    parts: dict[int, tuple[int, ...]] | None = None, controller_id: int = 1
) -> tuple[FakeZk, Controller, _Channel]:
    """Brokers 1-3 registered (their ports refuse), topic t, an active controller whose channel records."""
    zk = FakeZk()
    for path in Z.PERSISTENT_PATHS:
        await zk.ensure_path(path)
    for b in (1, 2, 3):
        info = Z.BrokerInfo(b, "127.0.0.1", 1, None)
        await zk.create(Z.BrokerIdZNode.path(b), Z.BrokerIdZNode.encode(info), ephemeral=True)
    parts = parts or {0: (1, 2, 3), 1: (2, 1, 3)}
    await zk.create(Z.TopicZNode.path("t"), Z.TopicZNode.encode(Z.TopicAssignment(parts, TOPIC_ID)))
    c = Controller(zk, controller_id, ControllerSettings(auto_leader_rebalance=False))  # type: ignore[arg-type]
    c.start()
    await _until(
        lambda: c.active and len(c.ctx.leaders) == len(parts), "controller elected, partitions online"
    )

    async def idle() -> None:
        return None

    # Every event queued so far (the startup's) has run and sent its requests to the real channel: on a
    # loaded machine `active` and the leaders can be seen while the startup event is still sending.
    await c.call("Idle", idle)
    assert c.channel is not None
    c.channel.close()
    ch = _Channel()
    c.channel = ch  # type: ignore[assignment]
    return zk, c, ch


def _answer(codes: dict[int, ErrorCode]) -> dict[str, Any]:
    return {
        "error_code": 0,
        "topics": [
            {
                "topic_id": topic_uuid(TOPIC_ID),
                "partition_errors": [{"partition_index": p, "error_code": int(e)} for p, e in codes.items()],
            }
        ],
    }


def _state(zk: FakeZk, p: int) -> Z.PartitionState:
    n = zk.nodes[Z.PartitionStateZNode.path("t", p)]
    return Z.PartitionStateZNode.decode(n.data, n.version)


def test_log_dir_event_asks_the_broker_and_storage_errors_take_its_replicas_offline() -> None:
    async def main() -> None:
        zk, c, ch = await _setup()
        assert _state(zk, 0).leader == 1 and _state(zk, 1).leader == 2
        await zk.create(
            Z.LogDirEventNotificationZNode.path_prefix,
            Z.LogDirEventNotificationZNode.encode(1),
            sequence=True,
        )
        # the controller reads and deletes the notification, then asks broker 1 about all its replicas
        await _until(lambda: ch.lai_partitions(1) == {("t", 0), ("t", 1)}, "LeaderAndIsr to broker 1")
        assert zk._kids(Z.LOG_DIR_EVENT_NOTIFICATION) == []
        cb = next(cb for b, api, _, cb in ch.sent if b == 1 and api == ApiKey.LEADER_AND_ISR)
        assert cb is not None
        ch.sent.clear()
        cb(1, _answer({0: ErrorCode.KAFKA_STORAGE_ERROR, 1: ErrorCode.NONE}))  # t-0's log failed on broker 1
        await _until(lambda: _state(zk, 0).leader not in (-1, 1), "t-0 led by another ISR member")
        st0, st1 = _state(zk, 0), _state(zk, 1)
        assert 1 not in st0.isr and set(st0.isr) == {2, 3}
        assert st1.leader == 2 and set(st1.isr) == {1, 2, 3}  # broker 1's other replica is untouched
        assert c.ctx.offline_replicas(("t", 0)) == [1] and c.ctx.offline_replicas(("t", 1)) == []
        await _until(lambda: any(api == ApiKey.UPDATE_METADATA for _, api, _, _ in ch.sent), "UpdateMetadata")
        um = next(body for _, api, body, _ in ch.sent if api == ApiKey.UPDATE_METADATA)
        offline = {
            ps["partition_index"]: ps["offline_replicas"]
            for t in um["topic_states"]
            for ps in t["partition_states"]
        }
        assert offline[0] == [1]
        # the offline replica is never chosen again: a preferred election of t-0 is not possible
        assert (await c.elect_preferred([("t", 0)]))[("t", 0)] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        # a later answer saying NONE (the log is back after a restart) makes it online again
        cb(1, _answer({0: ErrorCode.NONE}))
        await _until(lambda: c.ctx.offline_replicas(("t", 0)) == [], "online again")
        await c.close()

    asyncio.run(main())


def test_the_notification_znode_is_kafkas() -> None:
    data = Z.LogDirEventNotificationZNode.encode(7)
    assert json.loads(data) == {"version": 1, "broker": 7, "event": 1}
    assert Z.LogDirEventNotificationZNode.decode(data) == 7
    assert Z.LogDirEventNotificationZNode.path_prefix == "/log_dir_event_notification/log_dir_event_"


def test_the_broker_writes_the_notification_and_again_once_connected_if_it_could_not() -> None:
    from types import SimpleNamespace

    from kafkad.cluster.zk_mode import ClusterMode
    from kafkad.zk.client import ZkState

    async def main() -> None:
        zk = FakeZk()
        for path in Z.PERSISTENT_PATHS:
            await zk.ensure_path(path)
        cm = ClusterMode(None, zk, "cluster")  # type: ignore[arg-type]
        cm.broker = SimpleNamespace(broker_id=2)  # type: ignore[assignment]
        cm.controller = SimpleNamespace(on_zk_state=lambda *_a: None)  # type: ignore[assignment]

        def brokers() -> list[int]:
            kids = zk._kids(Z.LOG_DIR_EVENT_NOTIFICATION)
            return [
                Z.LogDirEventNotificationZNode.decode(zk.nodes[f"{Z.LOG_DIR_EVENT_NOTIFICATION}/{k}"].data)
                for k in kids
            ]

        cm._log_failed(None)
        await _until(lambda: brokers() == [2], "the notification written")
        zk.connected = False  # the connection drops: the write fails
        cm._log_failed(None)
        await asyncio.sleep(0.01)
        assert brokers() == [2]
        zk.connected = True
        cm._on_state(ZkState.CONNECTED, False)
        await _until(lambda: brokers() == [2, 2], "written once connected again")
        cm.controller = None
        await cm.close()

    asyncio.run(main())
