"""Purging change notifications, as Kafka's ZkNodeChangeNotificationListener.purgeObsoleteNotifications.

Config changes (/config/changes/config_change_<seq>) and ACL changes (/kafka-acl-changes/acl_changes_<seq>,
/kafka-acl-extended-changes/acl_changes_<seq>) are persistent sequential znodes every broker reads; nobody
owns them, so every broker, after processing them, deletes those created more than
CHANGE_EXPIRATION_MS (15 minutes, Kafka's changeExpirationMs) ago by ZooKeeper's clock (the znode's ctime).
A broker that was away longer than that reloads everything on start anyway. Deleting one another broker
already deleted is fine (NoNode is ignored).

Runs on the event loop (ZkClient calls only).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from kafkad.zk.client import NoNodeError, ZkClient

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def notification_seq(name: str) -> int:
    """The sequence number of `config_change_0000000012` (12); -1 for a name without one."""
    digits = name[-10:]
    return int(digits) if digits.isdigit() else -1


async def purge_obsolete(
    zk: ZkClient,
    path: str,
    children: Iterable[str],
    *,
    now_ms: Callable[[], float] = lambda: time.time() * 1000,
    expiration_ms: int = CHANGE_EXPIRATION_MS,
) -> int:
    """Delete the notifications under `path` older than `expiration_ms`; returns how many went. Oldest
    first, stopping at the first younger one (sequence order is creation order)."""
    deleted = 0
    for name in sorted(children, key=notification_seq):
        stat = await zk.exists(f"{path}/{name}")
        if stat is None:
            continue
        if stat.ctime + expiration_ms >= now_ms():
            break
        with contextlib.suppress(NoNodeError):
            await zk.delete(f"{path}/{name}")
            deleted += 1
    if deleted:
        log.info(
            "deleted %d change notifications older than %d s under %s", deleted, expiration_ms // 1000, path
        )
    return deleted
