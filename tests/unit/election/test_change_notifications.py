"""Change notifications older than 15 minutes are deleted, as Kafka's ZkNodeChangeNotificationListener does
(they piled up under /config/changes and the ACL change paths for ever). Driven with FakeZk, whose znodes
carry the ctime the test gives them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kafkad.cluster.zk_mode import ClusterMode
from kafkad.security.acl import PatternType
from kafkad.security.zk_store import ACL_CHANGES, ZkSecurityStore
from kafkad.zk import znodes as Z
from kafkad.zk.notifications import CHANGE_EXPIRATION_MS, purge_obsolete
from tests.unit.election.fake_zk import FakeZk
from tests.unit.election.test_controller_session import _until

OLD = CHANGE_EXPIRATION_MS + 60_000  # a minute past the expiry


async def _zk() -> FakeZk:
    zk = FakeZk()
    for path in Z.PERSISTENT_PATHS:
        await zk.ensure_path(path)
    return zk


async def _notify(zk: FakeZk, prefix: str, data: bytes, age_ms: int) -> str:
    zk.clock_ms = time.time() * 1000 - age_ms
    return await zk.create(prefix, data, sequence=True)


def test_purge_deletes_the_expired_oldest_first_and_keeps_the_young() -> None:
    async def main() -> None:
        zk = await _zk()
        prefix = Z.CONFIG_CHANGES + "/config_change_"
        old = [await _notify(zk, prefix, b"{}", OLD) for _ in range(3)]
        young = await _notify(zk, prefix, b"{}", 60_000)
        kids = zk._kids(Z.CONFIG_CHANGES)
        assert await purge_obsolete(zk, Z.CONFIG_CHANGES, kids) == 3  # type: ignore[arg-type]
        assert zk._kids(Z.CONFIG_CHANGES) == [young.rsplit("/", 1)[1]]
        assert all(p not in zk.nodes for p in old)
        again = await purge_obsolete(zk, Z.CONFIG_CHANGES, kids)  # type: ignore[arg-type]
        assert again == 0  # gone already: nothing to do

    asyncio.run(main())


def test_brokers_purge_config_and_acl_changes_when_they_process_them() -> None:
    async def main() -> None:
        zk = await _zk()
        acl_changes = ACL_CHANGES[PatternType.LITERAL]
        await zk.ensure_path(acl_changes)
        await _notify(
            zk, Z.CONFIG_CHANGES + "/config_change_", b'{"version":2,"entity_path":"brokers/<default>"}', OLD
        )
        await _notify(zk, acl_changes + "/acl_changes_", b"Topic:orders", OLD)
        seen: list[Any] = []
        store = ZkSecurityStore(zk, seen.append)  # type: ignore[arg-type]
        await store.start()  # at start: the expired ACL change goes
        assert zk._kids(acl_changes) == []
        cm = ClusterMode(None, zk, "cluster")  # type: ignore[arg-type]
        await cm._load_topic_configs()  # at start: the expired config change goes
        assert zk._kids(Z.CONFIG_CHANGES) == []
        # later notifications: processed, kept while young, deleted once expired by the next processing
        await _notify(zk, acl_changes + "/acl_changes_", b"Topic:logs", OLD)
        await _notify(zk, acl_changes + "/acl_changes_", b"Topic:fresh", 0)
        await _until(lambda: len(zk._kids(acl_changes)) == 1, "the expired ACL change deleted")
        await _notify(
            zk, Z.CONFIG_CHANGES + "/config_change_", b'{"version":2,"entity_path":"brokers/1"}', OLD
        )
        await _notify(zk, Z.CONFIG_CHANGES + "/config_change_", b'{"version":2,"entity_path":"brokers/2"}', 0)
        await _until(lambda: len(zk._kids(Z.CONFIG_CHANGES)) == 1, "the expired config change deleted")
        store.close()
        await cm.close()

    asyncio.run(main())
