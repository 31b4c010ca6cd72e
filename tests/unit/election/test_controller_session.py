"""The controller across a ZooKeeper session expiry (chaos runs: SIGSTOP of the controller past its session).

Driven with FakeZk (the ZkClient interface in memory): kazoo's path-less NONE events reach every watch on
expiry and must be ignored (the watches are set again by the re-election on the new session); an event
interrupted by the expiry must not fail with a traceback but be redone by resigning and re-electing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from kafkad.controller.controller import Controller, ControllerSettings
from kafkad.zk import znodes as Z
from tests.unit.election.fake_zk import FakeZk


async def _until(cond: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not cond():
            await asyncio.sleep(0.001)
    assert cond(), what


async def _cluster_zk() -> FakeZk:
    zk = FakeZk()
    for path in Z.PERSISTENT_PATHS:
        await zk.ensure_path(path)
    await zk.create(Z.TopicZNode.path("t"), Z.TopicZNode.encode(Z.TopicAssignment({0: (1,), 1: (1,)})))
    await _register(zk)
    return zk


async def _register(zk: FakeZk) -> None:
    """Broker 1, as cluster_mode registers it (ephemeral); its port refuses: requests to it just retry."""
    info = Z.BrokerInfo(1, "127.0.0.1", 1, None)
    await zk.create(Z.BrokerIdZNode.path(1), Z.BrokerIdZNode.encode(info), ephemeral=True)


async def _active_controller(zk: FakeZk) -> Controller:
    c = Controller(zk, 1, ControllerSettings(auto_leader_rebalance=False))  # type: ignore[arg-type]
    zk.add_state_listener(c.on_zk_state)
    c.start()
    await _until(lambda: c.active, "controller elected")
    return c


async def _new_session_reelects(zk: FakeZk, c: Controller, epoch: int) -> None:
    """As cluster_mode does on a new session: register again, then the controller elects (a new epoch)."""
    zk.new_session()
    await _register(zk)
    await _until(lambda: c.active, "re-elected on the new session")
    assert c.ctx.epoch == epoch + 1


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_session_expiry_events_reach_no_watch_and_the_controller_reelects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        zk = await _cluster_zk()
        c = await _active_controller(zk)
        epoch = c.ctx.epoch
        # the per-topic watch that gets a path-less event (set by the startup event, which may still run
        # after `active` turned true)
        await _until(lambda: Z.TopicZNode.path("t") in zk.data_watches, "the controller watches topic t")
        zk.expire_session()
        await asyncio.sleep(0)  # the path-less NONE events (call_soon) reach their watchers
        # and whatever they queued on the controller has run (no fixed sleep: a loaded machine breaks it)
        await _until(lambda: not c.active and c._queue.empty(), "resigned, its event queue drained")
        await _new_session_reelects(zk, c, epoch)
        assert set(c.ctx.assignment) == {("t", 0), ("t", 1)}
        # every watch is set again on the new session: a partition added later is seen
        await zk.set(
            Z.TopicZNode.path("t"), Z.TopicZNode.encode(Z.TopicAssignment({0: (1,), 1: (1,), 2: (1,)}))
        )
        await _until(lambda: ("t", 2) in c.ctx.assignment, "the topic watch fires on the new session")
        await c.close()

    with caplog.at_level(logging.INFO):
        asyncio.run(main())
    assert _errors(caplog) == []


def test_an_event_interrupted_by_the_expiry_is_redone_on_the_new_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        zk = await _cluster_zk()
        c = await _active_controller(zk)
        epoch = c.ctx.epoch
        zk.connected = False  # the session is gone but kazoo has not told us yet: calls fail
        c.put("ControllerChange", c._controller_change, active_only=False)
        c.put("TopicChange", c._topic_change)
        await _until(lambda: not c.active, "the interrupted event resigns")
        zk.connected = True
        zk.expire_session()
        await _new_session_reelects(zk, c, epoch)
        assert c.ctx.leaders.keys() == {("t", 0), ("t", 1)}
        await c.close()

    with caplog.at_level(logging.INFO):
        asyncio.run(main())
    assert _errors(caplog) == []
