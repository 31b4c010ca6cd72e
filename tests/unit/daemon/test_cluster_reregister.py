"""Re-registration on a new ZooKeeper session that the connection interrupts (the session survives).

A new session re-creates /brokers/ids/<id> (ClusterMode._reregister). When the connection drops under that
write and comes back on the same session, ZkClient reports CONNECTED with new_session False: the broker must
still register then, or the controller sees it as dead for as long as the session lives."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafkad.daemon.cluster_mode import ClusterMode
from kafkad.election import znodes as Z
from kafkad.election.zk_client import ZkState
from tests.unit.election.fake_zk import FakeZk
from tests.unit.election.test_controller_session import _until


def _cluster_mode(zk: FakeZk) -> tuple[ClusterMode, list[tuple[ZkState, bool]]]:
    spec = SimpleNamespace(name="PLAINTEXT")
    config = SimpleNamespace(
        security=SimpleNamespace(inter_broker=None, listeners={}),
        zookeeper=SimpleNamespace(session_timeout_ms=6000),
        server=SimpleNamespace(rack=None),
    )
    cm = ClusterMode(config, zk, "cluster")  # type: ignore[arg-type]
    cm.broker = SimpleNamespace(  # type: ignore[assignment]
        broker_id=2,
        advertised=[spec],
        advertised_spec=lambda _l=None: spec,
        advertised_host_port=lambda _l=None: ("127.0.0.1", 9092),
        services={},
    )
    told: list[tuple[ZkState, bool]] = []
    cm.controller = SimpleNamespace(on_zk_state=lambda s, n: told.append((s, n)))  # type: ignore[assignment]
    zk.add_state_listener(cm._on_state)
    return cm, told


def test_a_registration_interrupted_by_the_connection_is_redone_on_reconnect() -> None:
    async def main() -> None:
        zk = FakeZk()
        for path in Z.PERSISTENT_PATHS:
            await zk.ensure_path(path)
        cm, told = _cluster_mode(zk)
        path = Z.BrokerIdZNode.path(2)
        zk.expire_session()
        zk.new_session()  # CONNECTED, new session: _reregister is spawned...
        zk.connected = False  # ...and the connection drops before its write (same session)
        await _until(lambda: not cm._tasks, "the interrupted re-registration gave up")
        assert path not in zk.nodes
        zk.connected = True
        cm._on_state(ZkState.CONNECTED, False)  # reconnected within the session
        await _until(lambda: path in zk.nodes, "registered once connected again", timeout_s=2.0)
        await _until(lambda: (ZkState.CONNECTED, True) in told, "the controller told of the new session")
        cm.controller = None
        await cm.close()

    asyncio.run(main())
