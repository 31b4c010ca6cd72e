"""ReplicaManager: the partitions this broker hosts, each a Partition over a storage log.

Standalone, every local log is led by this broker with epoch 0. Creating, growing and deleting topics
goes through the LogManager (which owns directories and overrides); this object keeps the Partition
wrappers in step and wakes waiters of partitions that go away.

Cluster mode (`enter_cluster_mode`): every partition waits for the controller. `apply_leader_and_isr` is
Kafka's becomeLeaderOrFollower: a request from an older controller epoch is refused whole
(STALE_CONTROLLER_EPOCH); a partition state is taken only with a leader epoch above the one we have (else
STALE_CONTROLLER_EPOCH for it), and only if this broker is one of its replicas (else
UNKNOWN_TOPIC_OR_PARTITION); logs are created as needed; leaders stop fetching and start tracking their
followers, followers (re)start in the fetcher of their leader, truncating first (fetcher.py). Leadership
listeners (the group coordinator) hear of every change. `stop_replicas` is StopReplica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.replication.epoch_writes import write_epochs_off_loop
from kafkad.replication.fetcher import FetcherManager
from kafkad.replication.isr import IsrUpdater
from kafkad.replication.partition import Partition, Role
from kafkad.storage import partition_metadata
from kafkad.storage.leader_epoch import LeaderEpochCache
from kafkad.storage.log_offline import LogIOError, OfflineLog, is_transient
from kafkad.storage.log_sync import LogSync

if TYPE_CHECKING:
    from kafkad.replication.leader_fence import LeaderFence

log = logging.getLogger(__name__)


TP = tuple[str, int]
Listener = Callable[[Partition], None]


class LogManagerLike(Protocol):
    def get(self, topic: str, partition: int) -> Any: ...
    def offline(self, topic: str, partition: int) -> OfflineLog | None: ...
    def offline_logs(self) -> list[OfflineLog]: ...

    on_offline: Callable[[OfflineLog], None] | None

    def take_offline(self, topic: str, partition: int, exc: BaseException) -> OfflineLog | None: ...
    def create_partition(
        self, topic: str, partition: int, overrides: Mapping[str, str] | None = None
    ) -> Any: ...
    def delete_topic(self, topic: str) -> None: ...
    def delete_partition(self, topic: str, partition: int) -> None: ...
    def logs(self) -> Iterator[Any]: ...
    def check_writable(self) -> None: ...


class ReplicaManager:
    """Runs on the event loop."""

    def __init__(
        self,
        log_manager: LogManagerLike,
        broker_id: int,
        *,
        cluster_has: Callable[[str, int], bool] | None = None,
        topic_overrides: Callable[[str], Mapping[str, str] | None] | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.broker_id = broker_id
        self._partitions: dict[tuple[str, int], Partition] = {}
        # Topic ids (KIP-516) of the local topics, from their partition.metadata files (read once).
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topics_by_id: dict[uuid.UUID, str] = {}
        # cluster mode only (None / unused standalone)
        self.isr_updater: IsrUpdater | None = None
        self.fetchers: FetcherManager | None = None
        self.leader_fence: LeaderFence | None = None  # refuses Produce after a freeze (leader_fence.py)
        self.controller_epoch = -1
        # HWs as loaded from replication-offset-checkpoint: a loaded Partition starts as the standalone
        # leader (ISR = {self}, HW = LEO); cluster mode puts the checkpointed HW back (the tail above it
        # may be uncommitted and be truncated when the controller makes this broker a follower)
        self._loaded_hw: dict[TP, int] = {}
        self.now_ms: Callable[[], int] = lambda: 0
        # topic -> its config overrides, for logs created by LeaderAndIsr (the ZooKeeper control plane's
        # /config/topics); None or a missing topic = the broker defaults
        self.topic_overrides = topic_overrides
        self._on_leader: list[Listener] = []
        self._on_follower: list[Listener] = []
        # Partitions whose files failed (storage's log_offline): KAFKA_STORAGE_ERROR, offline in Metadata.
        self._offline: dict[tuple[str, int], OfflineLog] = {}
        log_manager.on_offline = self._went_offline
        # told when a partition goes offline at runtime (cluster mode: the log dir event notification)
        self.offline_listeners: list[Callable[[OfflineLog], None]] = []
        # cluster mode: whether the cluster has a partition (the control plane's metadata image), so one
        # this broker holds no replica of answers NOT_LEADER_OR_FOLLOWER (the client refreshes and goes to
        # the leader), as Kafka's ReplicaManager.getPartitionOrError; standalone: None,
        # UNKNOWN_TOPIC_OR_PARTITION. Given at construction (service/main.py), never patched later.
        self.cluster_has = cluster_has
        # flush.messages / flush.ms: appends fsynced before their answer (leader) or next fetch (follower)
        self.log_sync = LogSync(on_error=self._sync_failed, on_synced=self._synced)
        # Standalone after a crash: partitions whose logs still load (track_loading), by their directory.
        self._loading: dict[TP, Path] = {}
        self._all_loaded: asyncio.Event | None = None

    def load_from_logs(self) -> int:
        """Wrap every loaded log (after LogManager.load) as a leader partition."""
        for plog in self.log_manager.logs():
            key = (plog.topic, plog.partition)
            if key not in self._partitions:
                self._loaded_hw[key] = plog.high_watermark
                self._partitions[key] = Partition(plog, self.broker_id, log_sync=self.log_sync)
        for off in self.log_manager.offline_logs():
            self._offline[(off.topic, off.partition)] = off
        return len(self._partitions)

    # --- serving while a crash's logs load (standalone) ---------------------------------------------
    def track_loading(self, loading: Iterable[tuple[str, int, Path]]) -> None:
        """These partitions exist but their logs are still being recovered (LogManager.load_rest):
        they count as existing (topics, Metadata without a leader, never created anew) and requests
        for them are answered NOT_LEADER_OR_FOLLOWER, retriable, as Kafka answers a replica whose log
        is not open (ReplicaManager.getPartitionOrError), until `loaded` installs each one."""
        for topic, index, path in loading:
            self._loading[(topic, index)] = path

    def loaded(self, tp: TP, plog: Any) -> None:
        """LogManager.on_loaded: the partition's log is open (`plog`), or failed to open (None)."""
        if self._loading.pop(tp, None) is None:
            return
        if plog is None:
            off = self.log_manager.offline(*tp)
            if off is not None:
                self._offline[tp] = off
        else:
            self._partitions[tp] = Partition(plog, self.broker_id, log_sync=self.log_sync)
        if not self._loading and self._all_loaded is not None:
            self._all_loaded.set()

    def is_loading(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._loading

    def loading_of(self, topic: str) -> list[int]:
        return sorted(i for t, i in self._loading if t == topic)

    def loading_count(self) -> int:
        return len(self._loading)

    async def wait_loaded(self) -> None:
        """Until every partition is loaded (admin changes that touch every log of a topic wait)."""
        if not self._loading:
            return
        if self._all_loaded is None:
            self._all_loaded = asyncio.Event()
        await self._all_loaded.wait()

    # --- cluster mode ------------------------------------------------------------------------------
    def enter_cluster_mode(
        self, fetchers: FetcherManager, now_ms: Callable[[], int], isr_updater: IsrUpdater | None = None
    ) -> None:
        """Every loaded partition waits for the controller's LeaderAndIsr (no leader, epoch -1)."""
        self.fetchers = fetchers
        fetchers.on_storage_error = self.storage_failed  # a follower's I/O error: that partition alone
        fetchers.log_sync = self.log_sync
        self.now_ms = now_ms
        self.isr_updater = isr_updater
        loaded, self._loaded_hw = self._loaded_hw, {}
        for p in self._partitions.values():
            p.become_follower(-1, -1)
            hw = loaded.get((p.topic, p.index))
            if hw is not None and hw < p.log.high_watermark:
                p.log.high_watermark = hw

    def set_isr_updater(self, updater: IsrUpdater | None) -> None:
        self.isr_updater = updater
        for p in self._partitions.values():
            p.isr_updater = updater

    def add_leadership_listener(self, on_leader: Listener, on_follower: Listener) -> None:
        self._on_leader.append(on_leader)
        self._on_follower.append(on_follower)

    def apply_leader_and_isr(
        self,
        controller_id: int,
        controller_epoch: int,
        partition_states: Iterable[Mapping[str, Any]],
        live_leaders: Iterable[Mapping[str, Any]],
    ) -> dict[TP, ErrorCode]:
        """LeaderAndIsr (flattened partition states, each with its topic_name). Raises
        KafkaError(STALE_CONTROLLER_EPOCH) for a request from an older controller."""
        if controller_epoch < self.controller_epoch:
            raise KafkaError(
                ErrorCode.STALE_CONTROLLER_EPOCH,
                f"controller {controller_id} epoch {controller_epoch} < {self.controller_epoch}",
            )
        self.controller_epoch = controller_epoch
        endpoints = {b["broker_id"]: (b["host_name"], b["port"]) for b in live_leaders}
        result: dict[TP, ErrorCode] = {}
        leaders: list[tuple[Partition, Mapping[str, Any]]] = []
        followers: list[tuple[Partition, Mapping[str, Any]]] = []
        for ps in partition_states:
            tp = (ps["topic_name"], ps["partition_index"])
            if self.broker_id not in ps["replicas"]:
                result[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if tp in self._offline:  # ReplicaManager: HostedPartition.Offline answers KAFKA_STORAGE_ERROR
                result[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            part = self._partitions.get(tp)
            if part is not None and ps["leader_epoch"] <= part.leader_epoch:
                log.info(
                    "%s-%d: ignoring LeaderAndIsr with leader epoch %d (ours is %d)",
                    *tp,
                    ps["leader_epoch"],
                    part.leader_epoch,
                )
                result[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            if part is None:
                try:
                    part = self._add_for_controller(*tp)
                except (KafkaError, OSError) as e:
                    log.error("%s-%d: cannot create the log: %s", *tp, e)
                    result[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
            (leaders if ps["leader"] == self.broker_id else followers).append((part, ps))
            result[tp] = ErrorCode.NONE
        self._make_leaders(leaders)
        self._make_followers(followers, endpoints)
        return result

    def _add_for_controller(self, topic: str, index: int) -> Partition:
        overrides = self.topic_overrides(topic) if self.topic_overrides is not None else None
        plog = self.log_manager.create_partition(topic, index, overrides or None)
        part = Partition(plog, self.broker_id, log_sync=self.log_sync)
        part.become_follower(-1, -1)
        self._partitions[(topic, index)] = part
        return part

    def _make_leaders(self, leaders: list[tuple[Partition, Mapping[str, Any]]]) -> None:
        if not leaders:
            return
        if self.fetchers is not None:
            self.fetchers.remove((p.topic, p.index) for p, _ in leaders)
        now = self.now_ms()
        epochs: list[LeaderEpochCache] = []  # their checkpoints are written on a thread, see below
        for part, ps in leaders:
            part.isr_updater = self.isr_updater
            cache = getattr(part.log, "leader_epoch_cache", None)
            with cache.writes_deferred_to(epochs) if cache is not None else contextlib.nullcontext():
                part.become_leader(
                    ps["leader_epoch"],
                    ps["isr"],
                    ps["replicas"],
                    zk_version=ps.get("partition_epoch", ps.get("zk_version", 0)),
                    controller_epoch=ps["controller_epoch"],
                    now_ms=now,
                )
            log.info(
                "%s-%d: leader at epoch %d, ISR %s, LEO %d, HW %d",
                part.topic,
                part.index,
                part.leader_epoch,
                list(part.isr),
                part.log_end_offset,
                part.high_watermark,
            )
            for on_leader in self._on_leader:
                on_leader(part)
        if epochs:
            # Becoming leader of 1,000 partitions wrote 1,000 checkpoint files on the loop (~1 ms each
            # on a busy ext4): a thread does them.
            write_epochs_off_loop(epochs)

    def _make_followers(
        self, followers: list[tuple[Partition, Mapping[str, Any]]], endpoints: Mapping[int, tuple[str, int]]
    ) -> None:
        if not followers:
            return
        fetchers = self.fetchers
        if fetchers is not None:
            fetchers.remove((p.topic, p.index) for p, _ in followers)
        by_leader: dict[int, list[Partition]] = {}
        for part, ps in followers:
            part.become_follower(
                ps["leader_epoch"],
                ps["leader"],
                ps["replicas"],
                isr=ps["isr"],
                zk_version=ps.get("partition_epoch", ps.get("zk_version", 0)),
                controller_epoch=ps["controller_epoch"],
            )
            log.info(
                "%s-%d: follower of %d at epoch %d, LEO %d",
                part.topic,
                part.index,
                ps["leader"],
                part.leader_epoch,
                part.log_end_offset,
            )
            if ps["leader"] in endpoints:
                by_leader.setdefault(ps["leader"], []).append(part)
            else:  # Kafka: no fetcher until a LeaderAndIsr names a live leader
                log.info("%s-%d: leader %d is not alive; not fetching", part.topic, part.index, ps["leader"])
            for on_follower in self._on_follower:
                on_follower(part)
        if fetchers is not None:
            for leader, parts in by_leader.items():
                host, port = endpoints[leader]
                fetchers.add(parts, leader, host, port)

    def stop_replicas(
        self, controller_epoch: int, partitions: Iterable[tuple[str, int, int]], delete: bool
    ) -> dict[TP, ErrorCode]:
        """StopReplica: (topic, partition, leader epoch or -1/-2 for "any") per partition; stop
        following, and with `delete` remove the replica and its log. Raises STALE_CONTROLLER_EPOCH."""
        if controller_epoch < self.controller_epoch:
            raise KafkaError(
                ErrorCode.STALE_CONTROLLER_EPOCH,
                f"controller epoch {controller_epoch} < {self.controller_epoch}",
            )
        self.controller_epoch = controller_epoch
        result: dict[TP, ErrorCode] = {}
        stopped: list[Partition] = []
        for topic, index, epoch in partitions:
            tp = (topic, index)
            part = self._partitions.get(tp)
            if part is not None and epoch >= 0 and epoch < part.leader_epoch:
                result[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            result[tp] = ErrorCode.NONE
            if part is not None:
                stopped.append(part)
            elif delete and self._offline.pop(tp, None) is not None:
                self.log_manager.delete_partition(topic, index)
        if self.fetchers is not None:
            self.fetchers.remove((p.topic, p.index) for p in stopped)
        for part in stopped:
            if part.role is Role.LEADER:
                part.become_follower(part.leader_epoch, -1)
            if delete:
                del self._partitions[(part.topic, part.index)]
                self.log_manager.delete_partition(part.topic, part.index)
                part.wake_waiters()
                for on_follower in self._on_follower:
                    on_follower(part)
        return result

    def shrink_isrs(self, max_lag_ms: int) -> int:
        """Kafka's maybeShrinkIsr over the partitions this broker leads; the number of changes started."""
        now = self.now_ms()
        return sum(
            1 for p in self._partitions.values() if p.is_leader and p.maybe_shrink_isr(now, max_lag_ms)
        )

    def get(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def get_or_raise(self, topic: str, partition: int) -> Partition:
        p = self._partitions.get((topic, partition))
        if p is None:
            off = self._offline.get((topic, partition))
            if off is not None:
                raise KafkaError(
                    ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{partition} is offline: {off.reason}"
                )
            code = self.missing_error(topic, partition)
            raise KafkaError(code, f"{topic}-{partition} has no replica on this broker")
        return p

    def missing_error(self, topic: str, partition: int) -> ErrorCode:
        """The error for a partition `get` did not find: offline, or not here."""
        if (topic, partition) in self._offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if (topic, partition) in self._loading:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.cluster_has is not None and self.cluster_has(topic, partition):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def is_offline(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._offline

    def partition_known(self, topic: str, partition: int) -> bool:
        """Whether the partition exists for a request that does not need its replica here (OffsetCommit,
        OffsetDelete: Kafka's KafkaApis checks its metadata cache, not the local logs). Standalone: a
        local or offline log; cluster mode: also any partition in the cluster's metadata."""
        key = (topic, partition)
        if key in self._partitions or key in self._offline or key in self._loading:
            return True
        return self.cluster_has is not None and self.cluster_has(topic, partition)

    def offline_partitions(self) -> list[OfflineLog]:
        return list(self._offline.values())

    def offline_of(self, topic: str) -> list[OfflineLog]:
        return sorted((o for (t, _), o in self._offline.items() if t == topic), key=lambda o: o.partition)

    def storage_failed(self, topic: str, partition: int, exc: BaseException) -> KafkaError:
        """An I/O error on the partition's files (append, read, fsync): the error to answer with.

        A full disk (log_offline.is_transient) only fails the request; anything else takes the
        partition offline (its waiters fail, later requests get KAFKA_STORAGE_ERROR) while every
        other partition goes on.
        """
        if not is_transient(exc):
            self.log_manager.take_offline(topic, partition, exc)  # tells _went_offline (on_offline)
        message = exc.message if isinstance(exc, KafkaError) else f"{topic}-{partition}: {exc}"
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, message)

    def _synced(self, plog: Any) -> None:
        """LogSync moved `plog`'s recovery point: its partition's HW may have waited for that."""
        part = self._partitions.get((plog.topic, plog.partition))
        if part is not None and part.log is plog:
            part.synced()

    def _sync_failed(self, plog: Any, exc: Exception) -> None:
        """LogSync: an fsync of `plog` failed; offline as any other I/O error, unless that log is no
        longer the partition's (deleted or re-created while the fsync ran)."""
        if self.log_manager.get(plog.topic, plog.partition) is plog:
            log.error("%s-%d: fsync failed: %s", plog.topic, plog.partition, exc)
            self.storage_failed(plog.topic, plog.partition, exc)

    def _went_offline(self, off: OfflineLog) -> None:
        """LogManager.on_offline: the partition's log is gone (an I/O error, from a request, a fetcher
        or a periodic pass): drop its Partition, wake its waiters, stop fetching it."""
        tp = (off.topic, off.partition)
        self._offline[tp] = off
        for listener in self.offline_listeners:
            listener(off)
        p = self._partitions.pop(tp, None)
        if p is None:
            return
        if self.fetchers is not None:
            self.fetchers.remove([tp])
        p.offline = True  # a produce wait not yet parked answers at once (Partition.wait_replicated)
        p.wake_waiters()
        for on_follower in self._on_follower:  # e.g. the group coordinator unloads its groups
            on_follower(p)

    def error_for(self, topic: str, partition: int, exc: Exception) -> KafkaError:
        """What to answer for `exc` raised by the partition's log: an I/O error goes through
        `storage_failed` (maybe taking the partition offline), a KafkaError is itself."""
        if isinstance(exc, (LogIOError, OSError)):
            return self.storage_failed(topic, partition, exc)
        return exc if isinstance(exc, KafkaError) else KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))

    def topics(self) -> dict[str, int]:
        """Topic -> partition count, offline and loading partitions included."""
        out: dict[str, int] = {}
        for topic, _ in self._partitions:
            out[topic] = out.get(topic, 0) + 1
        for topic, _ in self._offline:
            out[topic] = out.get(topic, 0) + 1
        for topic, _ in self._loading:
            out[topic] = out.get(topic, 0) + 1
        return out

    def partitions_of(self, topic: str) -> list[Partition]:
        return sorted((p for (t, _), p in self._partitions.items() if t == topic), key=lambda p: p.index)

    def has_topic(self, topic: str) -> bool:
        return (
            any(t == topic for t, _ in self._partitions)
            or any(t == topic for t, _ in self._offline)
            or any(t == topic for t, _ in self._loading)
        )

    def all_partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def create_topic(
        self, topic: str, num_partitions: int, overrides: Mapping[str, str] | None = None
    ) -> None:
        """Small filesystem work (mkdir per partition, override files, partition.metadata)."""
        if self.has_topic(topic):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{topic}' already exists")
        for i in range(num_partitions):
            self._add(topic, i, overrides if i == 0 else None)
        self.set_topic_id(topic, uuid.uuid4())

    def add_partitions(self, topic: str, new_total: int) -> None:
        current = self.topics().get(topic, 0)
        for i in range(current, new_total):
            self._add(topic, i, None)
        self.set_topic_id(topic, self.topic_id(topic))

    def topic_id(self, topic: str) -> uuid.UUID:
        """The local topic's id (the zero UUID if no partition of it is here). Standalone's source of
        truth; a topic from before topic ids gets one now (as Kafka's controller gives one to a topic
        znode without). Blocking on the first call per topic: reads its partition.metadata files."""
        tid = self._topic_ids.get(topic)
        if tid is not None:
            return tid
        dirs = [p.log.directory for p in self.partitions_of(topic)]
        dirs += [path for (t, _), path in self._loading.items() if t == topic]
        if not dirs:
            return partition_metadata.ZERO
        found = next((t for d in dirs if (t := partition_metadata.read(d))), None)
        tid = found or uuid.uuid4()
        self.set_topic_id(topic, tid)
        return tid

    def topic_by_id(self, topic_id: uuid.UUID) -> str | None:
        """The local topic with this id, or None."""
        name = self._topics_by_id.get(topic_id)
        if name is None and topic_id.int != 0:
            for topic in self.topics():  # ids not read yet: read them all once
                self.topic_id(topic)
            name = self._topics_by_id.get(topic_id)
        return name

    def set_topic_id(self, topic: str, topic_id: uuid.UUID) -> None:
        """Record `topic_id` for the topic and write it into each local partition directory lacking it
        (Kafka's LeaderAndIsr handling does the same for the controller's id). Small blocking writes."""
        if topic_id.int == 0:
            return
        for p in self.partitions_of(topic):
            if partition_metadata.read(p.log.directory) != topic_id:
                partition_metadata.write(p.log.directory, topic_id)
        old = self._topic_ids.get(topic)
        if old is not None and old != topic_id:
            self._topics_by_id.pop(old, None)
        self._topic_ids[topic] = topic_id
        self._topics_by_id[topic_id] = topic

    def _add(self, topic: str, index: int, overrides: Mapping[str, str] | None) -> None:
        plog = self.log_manager.create_partition(topic, index, overrides or None)
        self._partitions[(topic, index)] = Partition(plog, self.broker_id, log_sync=self.log_sync)

    def delete_topic(self, topic: str) -> None:
        if any(t == topic for t, _ in self._loading):  # callers wait_loaded() first
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"topic '{topic}' is still loading")
        parts = self.partitions_of(topic)
        offline = self.offline_of(topic)
        if not parts and not offline:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{topic}' does not exist")
        for p in parts:
            del self._partitions[(topic, p.index)]
        tid = self._topic_ids.pop(topic, None)
        if tid is not None:
            self._topics_by_id.pop(tid, None)
        for off in offline:
            del self._offline[(topic, off.partition)]
        self.log_manager.delete_topic(topic)
        for p in parts:
            p.wake_waiters()

    def check_writable(self) -> None:
        """Raise the error a Produce gets before any append: a full disk, or a fenced leader."""
        self.log_manager.check_writable()
        fence = self.leader_fence
        if fence is not None:
            fence.check()
