"""A broker loss writes its partitions' new states in batched ZooKeeper multis (issue 21 goal 5).

One fenced multi per partition cost ~0.3 ms of the controller's time each through kazoo (1,000 partitions:
0.3-0.5 s of the BrokerChange event); the changes decided on the context go 100 to a multi (the epoch check
and one conditional set per partition). A partition a leader changed meanwhile fails its multi; that
batch falls back to the per-partition writes, which re-read the moved one and decide again, so every
partition still ends on ZooKeeper's current state."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kafkad.controller.controller import Controller, ControllerSettings
from kafkad.controller.partition_ops import WRITE_BATCH
from kafkad.zk import znodes as Z
from kafkad.zk.client import Op
from tests.unit.election.test_controller_session import _until
from tests.unit.election.test_log_dir_events import _setup, _state

N = 250
PARTS: dict[int, tuple[int, ...]] = {p: (1, 2, 3) for p in range(N)}  # broker 1 leads every partition


def test_a_broker_loss_writes_the_new_states_in_batched_multis() -> None:
    async def main() -> None:
        zk, c, ch = await _setup(PARTS, controller_id=3)
        ch.remove_broker = lambda broker_id: None  # type: ignore[attr-defined]  # the recording channel's
        # t-7's leader shrank its ISR to {1, 3} in ZooKeeper, not yet notified: the context is stale there
        st7 = _state(zk, 7)
        await zk.set(
            Z.PartitionStateZNode.path("t", 7), Z.PartitionStateZNode.encode(st7._replace(isr=(1, 3)))
        )
        multis: list[int] = []
        multi = zk.multi

        async def counting(ops: Sequence[Op]) -> list[Any]:
            multis.append(len(ops))
            return await multi(ops)

        zk.multi = counting  # type: ignore[method-assign]
        await zk.delete(Z.BrokerIdZNode.path(1))  # broker 1's session expired
        await _until(lambda: all(_state(zk, p).leader != 1 for p in range(N)), "every partition re-elected")
        for p in range(N):
            st = _state(zk, p)
            want = (3,) if p == 7 else (2, 3)  # t-7 decided on ZooKeeper's ISR, not the context's
            assert st.isr == want and st.leader == want[0], (p, st)
        batched = [n for n in multis if n > 2]
        assert len(batched) == -(-N // WRITE_BATCH)  # 3 multis carried the changes (one failed on t-7)
        # ... and only the failed batch went one partition at a time: 250 single writes before
        assert len(multis) <= len(batched) + WRITE_BATCH + 1, multis
        await c.close()

    asyncio.run(main())


def test_a_new_controller_reads_each_state_once_and_takes_a_dead_broker_out_of_every_isr() -> None:
    """The controller died with broker 1 (one appliance), a follower of every partition: its successor loads
    the states (one read each) and takes broker 1 out of every ISR from them, not after a second read of
    every state (1,000 gets, ~0.3 s before its first CreateTopics)."""

    async def main() -> None:
        zk, c, _ = await _setup({p: (2, 1, 3) for p in range(N)}, controller_id=1)
        await c.close()
        await zk.delete(Z.CONTROLLER)
        await zk.delete(Z.BrokerIdZNode.path(1))
        # t-7's ISR changed in ZooKeeper after the successor read it: its write fails alone and is redone
        reads: list[str] = []
        get = zk.get

        async def counting(path: str, watch: Any = None) -> Any:
            reads.append(path)
            got = await get(path, watch)
            if path == Z.PartitionStateZNode.path("t", 7) and reads.count(path) == 1:
                st7 = _state(zk, 7)
                await zk.set(path, Z.PartitionStateZNode.encode(st7._replace(isr=(2, 1))))
            return got

        zk.get = counting  # type: ignore[method-assign]
        successor = Controller(zk, 2, ControllerSettings(auto_leader_rebalance=False))  # type: ignore[arg-type]
        successor.start()
        await _until(
            lambda: successor.active and all(1 not in _state(zk, p).isr for p in range(N)),
            "broker 1 out of every ISR",
        )
        assert _state(zk, 7).isr == (2,) and _state(zk, 0).isr == (2, 3)
        state_reads = [r for r in reads if r.endswith("/state")]
        assert len(state_reads) == N + 1, len(state_reads)  # each once, t-7 twice (its write failed)
        await successor.close()

    asyncio.run(main())
