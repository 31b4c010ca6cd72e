"""Dynamic broker configs in ZooKeeper (cluster mode), Kafka's layout: /config/brokers/<default> and
/config/brokers/<id> hold {"version": 1, "config": {...}}, and every change records a
/config/changes/config_change_<seq> naming "brokers/<entity>", which every broker's watcher applies
(cluster/zk_mode.py -> DynamicBrokerConfig.reload).

The DynamicConfigStore protocol (config/dynamic.py) is blocking: it is called from executor
threads, so these methods hand their coroutine to the event loop that owns the ZkClient and wait.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from kafkad.zk import znodes as Z
from kafkad.zk.client import ZkClient

CONFIG_BROKERS = "/config/brokers"
TIMEOUT_S = 30.0

T = TypeVar("T")


class ZkDynamicConfigStore:
    def __init__(self, zk: ZkClient, loop: asyncio.AbstractEventLoop) -> None:
        self.zk = zk
        self.loop = loop

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(TIMEOUT_S)

    def load(self) -> dict[str, dict[str, str]]:
        return self._run(self._load())

    def save(self, entity: str, configs: Mapping[str, str]) -> None:
        self._run(self._save(entity, dict(configs)))

    async def _load(self) -> dict[str, dict[str, str]]:
        await self.zk.ensure_path(CONFIG_BROKERS)
        out: dict[str, dict[str, str]] = {}
        for entity in await self.zk.children(CONFIG_BROKERS):
            got = await self.zk.get_or_none(f"{CONFIG_BROKERS}/{entity}")
            if got is not None and got[0]:
                config = json.loads(got[0]).get("config") or {}
                out[entity] = {str(k): str(v) for k, v in config.items()}
        return out

    async def _save(self, entity: str, configs: dict[str, str]) -> None:
        path = f"{CONFIG_BROKERS}/{entity}"
        data = json.dumps({"version": 1, "config": configs}, sort_keys=True).encode()
        if await self.zk.exists(path) is None:
            await self.zk.create(path, data, makepath=True)
        else:
            await self.zk.set(path, data)
        await self.zk.create(
            Z.ConfigChangeZNode.path_prefix, Z.ConfigChangeZNode.encode(f"brokers/{entity}"), sequence=True
        )
