"""Cluster mode: shipped positions in ZooKeeper, one znode per partition, fenced by the leader epoch.

    /kafkad/bridge/<topic>/<partition> = {"version": 1, "next_offset": N, "leader_epoch": E, "broker": B}

Only a partition's leader ships it (`may_ship`: this broker leads the partition now). `advance` is a
conditional write on the znode's version (a create when absent), retried on a lost race; it is refused
(returns False: fenced) when the znode carries a higher leader epoch than this broker's, i.e. a newer
leader has taken over, and it never lowers the position. A new leader reads the position and ships from
the first batch past it, whatever its own segment boundaries (see `shipper.py`).

Every replica refreshes the positions of its partitions on each shipper pass (`refresh`), so retention
and the disk budget on followers respect the cluster-wide shipped position; `position` answers from
that cache (cheap: the retention pass calls it on the event loop). The blocking methods run on the
shipper's worker thread and hop to the event loop that owns the ZooKeeper client.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple, TypeVar

from kafkad.zk.client import BadVersionError, NodeExistsError, ZkClient

log = logging.getLogger(__name__)

ROOT = "/kafkad/bridge"
T = TypeVar("T")
LeaderEpoch = Callable[
    [str, int], "int | None"
]  # this broker's leader epoch of a partition, None: not leader


class StoredPosition(NamedTuple):
    next_offset: int
    leader_epoch: int
    broker: int


def position_path(topic: str, partition: int) -> str:
    return f"{ROOT}/{topic}/{partition}"


def encode(p: StoredPosition) -> bytes:
    body = {"version": 1, "next_offset": p.next_offset, "leader_epoch": p.leader_epoch, "broker": p.broker}
    return json.dumps(body, separators=(",", ":")).encode()


def decode(data: bytes) -> StoredPosition:
    d = json.loads(data)
    return StoredPosition(int(d["next_offset"]), int(d["leader_epoch"]), int(d.get("broker", -1)))


class ZkPositionStore:
    """The cluster's `ShippedPositionStore` (see the module doc)."""

    def __init__(
        self,
        zk: ZkClient,
        loop: asyncio.AbstractEventLoop,
        leader_epoch: LeaderEpoch,
        broker_id: int,
        *,
        timeout_s: float = 30.0,
        attempts: int = 5,
    ) -> None:
        self._zk = zk
        self._loop = loop
        self._leader_epoch = leader_epoch
        self._broker = broker_id
        self._timeout = timeout_s
        self._attempts = attempts
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int], int] = {}

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Blocking (worker thread): run a ZooKeeper call on the loop that owns the client."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self._timeout)

    def _read(self, topic: str, partition: int) -> tuple[StoredPosition, int] | None:
        got = self._call(self._zk.get_or_none(position_path(topic, partition)))
        if got is None:
            return None
        return decode(got[0]), int(got[1].version)

    def _remember(self, topic: str, partition: int, next_offset: int) -> None:
        with self._lock:
            key = (topic, partition)
            self._cache[key] = max(self._cache.get(key, -1), next_offset)

    def refresh(self, topic: str, partition: int) -> None:
        got = self._read(topic, partition)
        if got is not None:
            self._remember(topic, partition, got[0].next_offset)

    def position(self, topic: str, partition: int) -> int | None:
        with self._lock:
            return self._cache.get((topic, partition))

    def may_ship(self, topic: str, partition: int) -> bool:
        return self._leader_epoch(topic, partition) is not None

    def advance(self, topic: str, partition: int, next_offset: int) -> bool:
        epoch = self._leader_epoch(topic, partition)
        if epoch is None:
            return False  # no longer the leader
        path = position_path(topic, partition)
        for _ in range(self._attempts):
            got = self._read(topic, partition)
            try:
                if got is None:
                    new = StoredPosition(next_offset, epoch, self._broker)
                    self._call(self._zk.create(path, encode(new), makepath=True))
                else:
                    cur, version = got
                    if cur.leader_epoch > epoch:
                        log.info(
                            "bridge: %s-%d shipped position fenced: leader epoch %d is past ours (%d)",
                            topic,
                            partition,
                            cur.leader_epoch,
                            epoch,
                        )
                        self._remember(topic, partition, cur.next_offset)
                        return False
                    new = StoredPosition(max(cur.next_offset, next_offset), epoch, self._broker)
                    if new != cur:
                        self._call(self._zk.set(path, encode(new), version))
            except (NodeExistsError, BadVersionError):
                continue  # another writer got there first: read again
            self._remember(topic, partition, new.next_offset)
            return True
        log.warning(
            "bridge: %s-%d shipped position: lost %d races in a row", topic, partition, self._attempts
        )
        return False
