"""IsrWriter: replication's IsrUpdater over ZooKeeper (Kafka <= 2.6: the leader writes the state znode).

`update_isr` is a setData of /brokers/topics/<t>/partitions/<p>/state conditional on the zkVersion the
leader knows. On BADVERSION, as Kafka's ReplicationUtils.checkLeaderAndIsrZkData, the znode is read back:
if it already holds exactly what we wanted (our earlier write went through but its answer was lost), that
is success; otherwise the controller changed the partition and the leader is fenced (None). Each successful
change is recorded under /isr_change_notification, batched over a short window (Kafka batches for 2.5 s;
we use `notify_delay_s`) so the controller sends one UpdateMetadata for a burst of changes.

Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging

from kafkad.replication.isr import LeaderAndIsr
from kafkad.zk import znodes as Z
from kafkad.zk.client import BadVersionError, NoNodeError, ZkClient

log = logging.getLogger(__name__)

_RETRY_S = 1.0  # after a failed notification create (ZooKeeper away)


class IsrWriter:
    def __init__(self, zk: ZkClient, *, notify_delay_s: float = 0.05) -> None:
        self.zk = zk
        self.notify_delay_s = notify_delay_s
        self._pending: set[tuple[str, int]] = set()
        self._flush: asyncio.Task[None] | None = None

    async def update_isr(self, topic: str, partition: int, new: LeaderAndIsr) -> int | None:
        path = Z.PartitionStateZNode.path(topic, partition)
        wanted = Z.PartitionState(new.leader, new.leader_epoch, tuple(new.isr), new.controller_epoch)
        data = Z.PartitionStateZNode.encode(wanted)
        try:
            try:
                stat = await self.zk.set(path, data, new.zk_version)
                version: int = stat.version
            except BadVersionError:
                got = await self.zk.get_or_none(path)
                if got is None:
                    return None
                current = Z.PartitionStateZNode.decode(got[0], got[1].version)
                if current._replace(zk_version=0) != wanted:
                    log.info(
                        "ISR update of %s-%d fenced: znode at version %d", topic, partition, got[1].version
                    )
                    return None
                version = got[1].version
            except NoNodeError:
                return None
        except (ConnectionError, OSError):
            raise
        except Exception as e:  # kazoo's ConnectionLoss / SessionExpired and friends
            raise ConnectionError(f"ZooKeeper: {e!r}") from e
        self._pending.add((topic, partition))
        if self._flush is None or self._flush.done():
            self._flush = asyncio.get_running_loop().create_task(self._notify())
        return version

    async def _notify(self) -> None:
        # Loops until nothing is pending: changes recorded while a create is out (this task not done, so
        # update_isr starts no other) or after a failed create go out in the next round, not at the next
        # ISR change, which may never come.
        delay = self.notify_delay_s
        while True:
            await asyncio.sleep(delay)
            batch, self._pending = sorted(self._pending), set()
            if not batch:
                return
            try:
                await self.zk.create(
                    Z.IsrChangeNotificationZNode.path_prefix,
                    Z.IsrChangeNotificationZNode.encode(batch),
                    sequence=True,
                )
                delay = self.notify_delay_s
            except (
                Exception
            ) as e:  # ZooKeeper connection loss / session expiry: an ordinary fault, no traceback
                log.warning(
                    "could not record an ISR change notification for %d partitions; retrying: %r",
                    len(batch),
                    e,
                )
                self._pending.update(batch)
                delay = max(self.notify_delay_s, _RETRY_S)

    async def close(self) -> None:
        """Let a pending notification go out (bounded: ZooKeeper may be gone)."""
        if self._flush is not None and not self._flush.done():
            done, _ = await asyncio.wait([self._flush], timeout=2.0)
            if not done:
                self._flush.cancel()
                await asyncio.gather(self._flush, return_exceptions=True)
