"""ClusterAdmin: the cluster-mode side of the admin APIs, usable from any broker.

As ZooKeeper-mode Kafka's AdminZkClient/ZkAdminManager: CreateTopics writes /config/topics/<t> and then
/brokers/topics/<t> (the controller's topic watch does the rest), CreatePartitions rewrites the topic's
assignment conditionally on its zkVersion, DeleteTopics creates /admin/delete_topics/<t>, AlterConfigs
replaces /config/topics/<t> and records a /config/changes notification that every broker applies. The
calls that create or delete wait (bounded) until the cluster shows the result, as Kafka's delayed
CreateTopics/DeleteTopics do. Elections go to the local controller (NOT_CONTROLLER when it is not active,
and the client retries at the controller, as Kafka).

Runs on the event loop; every ZooKeeper access is async.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial, wraps
from typing import Any, ParamSpec, TypeVar

from kafkad.controller.assignment import assign_new_partitions, assign_replicas, validate_assignment
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.protocol.topic_rules import check_new_partition_count, topic_exists
from kafkad.zk import znodes as Z
from kafkad.zk.client import (
    ZK_CONNECTION_ERRORS,
    BadVersionError,
    CreateOp,
    NodeExistsError,
    SetOp,
    ZkClient,
)

log = logging.getLogger(__name__)

TP = tuple[str, int]
PREFERRED, UNCLEAN = 0, 1


def new_topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def zk_down_is_retriable(fn: Callable[_P, Awaitable[_R]]) -> Callable[_P, Awaitable[_R]]:
    """For the methods requests call: ZooKeeper unreachable (connection lost, session expired) is the
    retriable REQUEST_TIMED_OUT on the wire with a message saying why, not an UNKNOWN_SERVER_ERROR logged
    as a broker bug with a traceback. Internal callers that redo their work on reconnect use the
    unwrapped ZooKeeper calls and still see ZK_CONNECTION_ERRORS."""

    @wraps(fn)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return await fn(*args, **kwargs)
        except ZK_CONNECTION_ERRORS as e:
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT, f"ZooKeeper is unreachable ({type(e).__name__}); retry"
            ) from None

    return wrapper


class ClusterAdmin:
    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        *,
        validate_configs: Callable[[Mapping[str, str]], object],
        default_partitions: int,
        default_replication_factor: int,
        controller: Any = None,
        topic_ready: Callable[[str, int], bool] | None = None,
        wait_timeout_s: float = 30.0,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.broker_epoch = -1
        self.controller = controller  # election.controller.Controller
        self._validate_configs = validate_configs
        self._default_partitions = default_partitions
        self._default_rf = default_replication_factor
        self._topic_ready = topic_ready
        self._wait_timeout_s = wait_timeout_s
        self.topic_configs: dict[str, dict[str, str]] = {}  # kept by cluster_mode's config watcher

    def controller_id(self) -> int:
        return int(self.controller.controller_id) if self.controller is not None else -1

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The topic's configs from /config/topics (as last seen), for creating its local logs."""
        return dict(self.topic_configs.get(topic, {}))

    @zk_down_is_retriable
    async def live_brokers(self) -> dict[int, Z.BrokerInfo]:
        ids = await self.zk.children(Z.BROKER_IDS)
        got = await asyncio.gather(*(self.zk.get_or_none(f"{Z.BROKER_IDS}/{i}") for i in ids))
        return {
            int(i): Z.BrokerIdZNode.decode(int(i), g[0], g[1].czxid)
            for i, g in zip(ids, got, strict=True)
            if g
        }

    @zk_down_is_retriable
    async def topic_exists(self, name: str) -> bool:
        return await self.zk.exists(Z.TopicZNode.path(name)) is not None

    # --- CreateTopics -------------------------------------------------------------------------------
    @zk_down_is_retriable
    async def create_topics(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        replica_assignment: Mapping[int, Sequence[int]] | None,
        configs: Mapping[str, str],
        validate_only: bool,
        *,
        wait: bool = True,
    ) -> dict[int, list[int]]:
        """Returns the assignment; raises KafkaError with Kafka's codes."""
        if await self.topic_exists(name):
            raise topic_exists(name)
        brokers = await self.live_brokers()
        if replica_assignment:
            assignment = {int(p): [int(b) for b in r] for p, r in replica_assignment.items()}
            validate_assignment(assignment, brokers)
        else:
            n = self._default_partitions if num_partitions == -1 else num_partitions
            rf = self._default_rf if replication_factor == -1 else replication_factor
            assignment = assign_replicas({b: i.rack for b, i in brokers.items()}, n, rf)
        if configs:
            self._validate_configs(configs)
        if validate_only:
            return assignment
        a = Z.TopicAssignment({p: tuple(r) for p, r in assignment.items()}, new_topic_id())
        ops: list[CreateOp | SetOp] = []
        if configs:
            self.topic_configs[name] = dict(configs)
            ops += await self._config_ops(name, configs)
        ops.append(CreateOp(Z.TopicZNode.path(name), Z.TopicZNode.encode(a)))
        try:
            await self.zk.multi(ops)
        except NodeExistsError:
            raise topic_exists(name) from None
        log.info("topic %s created in ZooKeeper: %s", name, assignment)
        if wait:
            await self._wait_ready(name, len(assignment))
        return assignment

    async def _config_ops(self, name: str, configs: Mapping[str, str]) -> list[CreateOp | SetOp]:
        path = Z.TopicConfigZNode.path(name)
        data = Z.TopicConfigZNode.encode(configs)
        change = CreateOp(
            Z.ConfigChangeZNode.path_prefix, Z.ConfigChangeZNode.encode(f"topics/{name}"), sequence=True
        )
        if await self.zk.exists(path) is None:
            return [CreateOp(path, data), change]
        return [SetOp(path, data), change]

    async def _wait_ready(
        self, name: str, partitions: int, first: int = 0, timeout_s: float | None = None
    ) -> None:
        """Until partitions `first`..`partitions`-1 have a leader in ZooKeeper (the controller elected
        it) and, once this broker's metadata cache is fed by UpdateMetadata, until the cache shows them
        (bounded). Raises REQUEST_TIMED_OUT when ZooKeeper shows no leader by the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._wait_timeout_s if timeout_s is None else timeout_s)
        for p in range(first, partitions):
            path = Z.PartitionStateZNode.path(name, p)
            while True:
                changed: asyncio.Future[None] = loop.create_future()
                got = await self.zk.get_or_none(path, watch=partial(_fire, changed))
                if got is None:
                    if await self.zk.exists(path, watch=partial(_fire, changed)) is not None:
                        # Created between the two reads: this exists watch is now a data watch that
                        # fires only at the state's next change, so read it again instead of waiting.
                        continue
                elif Z.PartitionStateZNode.decode(got[0], got[1].version).leader >= 0:
                    break
                left = deadline - loop.time()
                if left <= 0:
                    raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"{name}-{p} has no leader yet")
                await asyncio.wait([changed], timeout=left)
        ready = self._topic_ready
        while ready is not None and not ready(name, partitions) and loop.time() < deadline:
            await asyncio.sleep(0.01)

    # --- CreatePartitions ---------------------------------------------------------------------------
    @zk_down_is_retriable
    async def create_partitions(
        self,
        name: str,
        count: int,
        assignment: Sequence[Sequence[int]] | None,
        validate_only: bool,
        timeout_ms: int = 30_000,
    ) -> None:
        """Adds partitions in ZooKeeper. As Kafka's ZkAdminManager: with `timeout_ms` <= 0 answers once
        written, else once the new partitions have leaders (REQUEST_TIMED_OUT past `timeout_ms`)."""
        got = await self.zk.get_or_none(Z.TopicZNode.path(name))
        current = Z.TopicZNode.decode(got[0]) if got is not None else None
        have = len(current.partitions) if current is not None else 0
        check_new_partition_count(name, have, count, len(assignment) if assignment else None)
        assert got is not None and current is not None  # have > 0
        brokers = await self.live_brokers()
        if assignment:
            added = {have + i: [int(b) for b in r] for i, r in enumerate(assignment)}
            validate_assignment(added, brokers, first_partition=have)
        else:
            added = assign_new_partitions({b: i.rack for b, i in brokers.items()}, current.partitions, count)
        if validate_only:
            return
        parts = dict(current.partitions)
        parts.update({p: tuple(r) for p, r in added.items()})
        try:
            await self.zk.set(
                Z.TopicZNode.path(name),
                Z.TopicZNode.encode(current._replace(partitions=parts)),
                got[1].version,
            )
        except BadVersionError:
            raise KafkaError(
                ErrorCode.REASSIGNMENT_IN_PROGRESS, f"topic {name} changed concurrently; retry"
            ) from None
        if timeout_ms > 0:
            await self._wait_ready(name, count, first=have, timeout_s=timeout_ms / 1000)

    # --- DeleteTopics -------------------------------------------------------------------------------
    @zk_down_is_retriable
    async def delete_topics(
        self, names: Sequence[str], timeout_s: float | None = None
    ) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        gone: list[asyncio.Future[None]] = []
        watchers: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        for name in names:
            if not await self.topic_exists(name):
                out[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            with contextlib.suppress(NodeExistsError):
                await self.zk.create(Z.DeleteTopicZNode.path(name))
            out[name] = ErrorCode.NONE
            fut: asyncio.Future[None] = loop.create_future()
            gone.append(fut)
            watchers.append(loop.create_task(self._until_gone(name, fut)))
        if gone:
            try:
                await asyncio.wait_for(asyncio.gather(*gone), timeout_s or self._wait_timeout_s)
            except TimeoutError:
                for name, code in out.items():
                    if code == ErrorCode.NONE and await self.topic_exists(name):
                        out[name] = ErrorCode.REQUEST_TIMED_OUT
            finally:
                for w in watchers:
                    w.cancel()
        return out

    async def _until_gone(self, name: str, fut: asyncio.Future[None]) -> None:
        while not fut.done():
            changed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def fire(_e: Any, changed: asyncio.Future[None] = changed) -> None:
                if not changed.done():
                    changed.set_result(None)

            if await self.zk.exists(Z.TopicZNode.path(name), watch=fire) is None:
                fut.set_result(None)
                return
            await asyncio.wait([changed, fut], return_when=asyncio.FIRST_COMPLETED)

    # --- AlterConfigs -------------------------------------------------------------------------------
    @zk_down_is_retriable
    async def alter_topic_configs(
        self, name: str, configs: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        """Replace the topic's configs (a None value deletes a key, as incremental deletes)."""
        if not await self.topic_exists(name):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        new = {k: v for k, v in configs.items() if v is not None}
        self._validate_configs(new)
        if validate_only:
            return
        self.topic_configs[name] = new
        await self.zk.multi(await self._config_ops(name, new))

    async def read_topic_configs(self, name: str) -> dict[str, str]:
        got = await self.zk.get_or_none(Z.TopicConfigZNode.path(name))
        return Z.TopicConfigZNode.decode(got[0]) if got else {}

    # --- reassignment -------------------------------------------------------------------------------
    @zk_down_is_retriable
    async def alter_reassignments(self, moves: dict[TP, list[int] | None]) -> dict[TP, ErrorCode]:
        """AlterPartitionReassignments: the controller's job (NOT_CONTROLLER elsewhere, as Kafka)."""
        if self.controller is None or not self.controller.active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
        result: dict[TP, ErrorCode] = await self.controller.alter_reassignments(moves)
        return result

    @zk_down_is_retriable
    async def list_reassignments(
        self, partitions: list[TP] | None
    ) -> dict[TP, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """Reassignments in flight, from the topic znodes' adding/removing replicas (any broker)."""
        topics = (
            sorted({t for t, _ in partitions})
            if partitions is not None
            else await self.zk.children(Z.BROKER_TOPICS)
        )
        out: dict[TP, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
        for t in topics:
            got = await self.zk.get_or_none(Z.TopicZNode.path(t))
            if got is None:
                continue
            a = Z.TopicZNode.decode(got[0])
            for p in sorted(set(a.adding) | set(a.removing)):
                if partitions is None or (t, p) in partitions:
                    out[(t, p)] = (a.partitions.get(p, ()), a.adding.get(p, ()), a.removing.get(p, ()))
        return out

    # --- elections ----------------------------------------------------------------------------------
    @zk_down_is_retriable
    async def elect_leaders(self, election_type: int, partitions: list[TP] | None) -> dict[TP, ErrorCode]:
        if self.controller is None or not self.controller.active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
        if election_type not in (PREFERRED, UNCLEAN):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}")
        elect = (
            self.controller.elect_preferred if election_type == PREFERRED else self.controller.elect_unclean
        )
        result: dict[TP, ErrorCode] = await elect(partitions)
        return result


def _fire(fut: asyncio.Future[None], _event: object = None) -> None:
    if not fut.done():
        fut.set_result(None)


class ZkProducerIds:
    """Producer-id blocks from /latest_producer_id_block (Kafka's ZK ProducerIdManager): a broker claims the
    next block of 1000 by a setData conditional on the znode's version, so no two brokers share ids."""

    def __init__(self, zk: ZkClient, broker_id: int, block_size: int = Z.PRODUCER_ID_BLOCK_SIZE) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.block_size = block_size
        self._next = 0
        self._end = -1  # inclusive
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """Nothing on disk in cluster mode (compatibility with the standalone manager)."""

    async def _claim(self) -> Z.ProducerIdBlock:
        while True:
            got = await self.zk.get_or_none(Z.LATEST_PRODUCER_ID_BLOCK)
            if got is None:
                with contextlib.suppress(NodeExistsError):
                    await self.zk.create(Z.LATEST_PRODUCER_ID_BLOCK)
                continue
            block = Z.ProducerIdBlockZNode.next_block(
                Z.ProducerIdBlockZNode.decode(got[0]), self.broker_id, self.block_size
            )
            try:
                await self.zk.set(
                    Z.LATEST_PRODUCER_ID_BLOCK, Z.ProducerIdBlockZNode.encode(block), got[1].version
                )
                return block
            except BadVersionError:
                continue

    @zk_down_is_retriable
    async def allocate(self) -> int:
        async with self._lock:
            if self._next > self._end:
                block = await self._claim()
                self._next, self._end = block.start, block.end
            pid = self._next
            self._next += 1
            return pid
