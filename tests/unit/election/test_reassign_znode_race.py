"""/admin/reassign_partitions created between the controller's read (no node) and its exists watch: the
exists call returns the node's stat and its watch becomes a data watch that fires only at the node's next
change, so the controller must read the node then, not wait (the same race issue 24 item 7 found in
CreatePartitions). Real Controller on the fake ZooKeeper."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kafkad.zk import znodes as Z
from tests.unit.election.test_controlled_shutdown import PARTS
from tests.unit.election.test_log_dir_events import _setup, _state, _until


def test_a_reassignment_created_between_read_and_watch_is_acted_on() -> None:
    async def main() -> None:
        zk, c, _ = await _setup(PARTS, controller_id=3)
        before = _state(zk, 0)
        target = [2, 3]  # t-0 moves off broker 1
        body = json.dumps(
            {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": target}]}
        ).encode()
        exists = zk.exists

        async def racing_exists(path: str, watch: Any = None) -> Any:
            if path == Z.REASSIGN_PARTITIONS and path not in zk.nodes:
                # no watch is pending on the path (the one that fired led to this read: a finished
                # reassignment's znode deleted), and the admin tool creates it before ours is set
                zk.data_watches.pop(path, None)
                await zk.create(path, body)
            return await exists(path, watch)

        zk.exists = racing_exists  # type: ignore[method-assign]
        c.put("PartitionReassignment", c._reassign_znode)
        await _until(lambda: sorted(_state(zk, 0).isr) == target, "t-0 reassigned to [2, 3]")
        assert _state(zk, 0).leader in target and _state(zk, 0).leader_epoch > before.leader_epoch
        await c.close()

    asyncio.run(main())
