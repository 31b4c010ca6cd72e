"""Re-registration on a new ZooKeeper session that the connection interrupts (the session survives).

A new session re-creates /brokers/ids/<id> (ClusterMode._reregister). When the connection drops under that
write and comes back on the same session, ZkClient reports CONNECTED with new_session False: the broker must
still register then, or the controller sees it as dead for as long as the session lives."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest
from kazoo.protocol.states import EventType

from kafkad.cluster.zk_mode import ClusterMode
from kafkad.zk import znodes as Z
from kafkad.zk.client import ZkState
from tests.unit.election.fake_zk import FakeZk
from tests.unit.election.test_controller_session import _until


async def _cluster_mode() -> tuple[FakeZk, ClusterMode, list[tuple[ZkState, bool]]]:
    """A FakeZk with the persistent paths and a ClusterMode of broker 2 listening to it; the states the
    controller is told."""
    zk = FakeZk()
    for path in Z.PERSISTENT_PATHS:
        await zk.ensure_path(path)
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
    )
    told: list[tuple[ZkState, bool]] = []
    cm.controller = SimpleNamespace(on_zk_state=lambda s, n: told.append((s, n)))  # type: ignore[assignment]
    zk.add_state_listener(cm._on_state)
    return zk, cm, told


def test_a_registration_interrupted_by_the_connection_is_redone_on_reconnect() -> None:
    async def main() -> None:
        zk, cm, told = await _cluster_mode()
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


def test_a_reconnect_during_a_waiting_registration_registers_once(caplog: pytest.LogCaptureFixture) -> None:
    """The re-registration waits for an older session's /brokers/ids/<id> to go; a connection blip meanwhile
    (CONNECTED, same session) must not start a second one, which would delete and re-create the first's
    znode (a broker bounce for the controller)."""

    async def main() -> None:
        zk, cm, _ = await _cluster_mode()
        path = Z.BrokerIdZNode.path(2)
        zk.session = 99  # an older incarnation's session still holds the id
        await zk.create(path, b"{}", ephemeral=True)
        zk.session = 1
        zk.new_session()
        await _until(lambda: bool(zk.data_watches.get(path)), "waiting for the older session's znode")
        cm._on_state(ZkState.CONNECTED, False)  # a blip on the new session
        await asyncio.sleep(0.01)
        del zk.nodes[path]  # the older session expires
        zk._fire(zk.data_watches, path, EventType.DELETED)
        await _until(lambda: not cm._tasks, "registered")
        assert zk.nodes[path].owner == zk.session
        cm.controller = None
        await cm.close()

    with caplog.at_level(logging.INFO, logger="kafkad.cluster.zk_mode"):
        asyncio.run(main())
    assert sum("registered /brokers/ids/2" in r.getMessage() for r in caplog.records) == 1
