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
