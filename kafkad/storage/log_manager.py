"""LogManager: every partition log under `log.dirs`, their checkpoints, retention, flushing and the disk budget.

Layout of each log dir (Kafka's): `meta.properties` (see meta_properties.py), the three offset
checkpoints (recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint), `.kafka_cleanshutdown` after a clean stop, and one `<topic>-<p>/`
directory per partition. A deleted topic's dirs are renamed `<topic>-<p>.<uuid>-delete` and removed
later; such leftovers found at load time are removed too.

Start (`load`, blocking): per dir, read the checkpoints once, note and delete the clean-shutdown marker
(as Kafka does: a crash while loading then counts as unclean), and open every partition in a small
thread pool. With the marker present a partition opens without recovery; without it the opener
recovers segments past the recovery point. Stop (`shutdown`, blocking): flush, producer snapshots,
checkpoints, then the marker.

Periodic work (retention, disk budget, flush, deferred deletion) is in log_manager_passes: the daemon
calls the passes; each decides on the event loop and leaves the slow part to a blocking method.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from kafkad.clock import Clock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage import checkpoints
from kafkad.storage.disk_budget import (
    BudgetState,
    ShippedCheck,
    UsageProbe,
    WriteGate,
    everything_shipped,
    statvfs_usage,
)
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_dir_layout import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    IGNORED_DIR_SUFFIXES,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
    parse_partition_dir,
    validate_topic_name,
)
from kafkad.storage.log_manager_config import LogManagerConfig
from kafkad.storage.log_manager_passes import Deletion, LogManagerPasses, _Freed, _Pending
from kafkad.storage.log_offline import OfflineLog, Offsets, attempt, describe, failed_file
from kafkad.storage.log_opener import LogOpener, OpenRequest, default_opener, release_deleted_log
from kafkad.storage.partition_log import AppendOrigin, AppendResult, PartitionLog
from kafkad.storage.topic_configs import read_topic_overrides, write_topic_overrides

log = logging.getLogger(__name__)

__all__ = ["Deletion", "LoadJob", "LoadStats", "LogManager"]

LoadJob = tuple[str, OpenRequest]  # (log dir, what its checkpoints say about one partition)
OpenResult = tuple[PartitionLog, dict[str, str]] | Exception  # the log and its topic's overrides, or why not
# Tests only: a dir in which a file `<topic>-<partition>.hold` keeps that partition's background load
# waiting until the file is removed (a recovery made slow deterministically, tests/integration).
HOLD_LOAD_ENV = "KAFKAD_TEST_HOLD_LOAD_DIR"


@dataclass(frozen=True, slots=True)
class LoadStats:
    partitions: int
    recovered: int  # partitions opened with recovery (their dir had no clean-shutdown marker)
    clean_dirs: int
    seconds: float


class LogManager(LogManagerPasses):
    """All partition logs of this broker. Runs on the event loop except the methods marked blocking."""

    def __init__(
        self,
        config: LogManagerConfig,
        default_log_config: LogConfig,
        clock: Clock,
        *,
        opener: LogOpener = default_opener,
        usage_probe: UsageProbe = statvfs_usage,
        is_shipped: ShippedCheck = everything_shipped,
    ) -> None:
        self.config = config
        self.default_log_config = default_log_config
        self._clock = clock
        self._opener = opener
        self._probe = usage_probe
        self._is_shipped = is_shipped
        self._dirs = [str(Path(d)) for d in config.log_dirs]
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._overrides: dict[str, dict[str, str]] = {}
        self._pending: list[_Pending] = []
        self._freed: list[_Freed] = []
        self._lock = threading.Lock()  # load() and the loop may both queue deletions
        self._recovery_flush_marks = weakref.WeakKeyDictionary()
        self._checkpoint_lock = threading.Lock()
        self.budget = BudgetState()
        self.write_gate = WriteGate(self.headroom, self.budget)  # every log's appends charge it
        # Spark bridge metrics: segments retention kept only because they are unshipped (last pass),
        # and unshipped segments the disk budget had to delete anyway (since start).
        self.retention_held_segments = 0
        self.unshipped_deleted_total = 0
        self.load_stats: LoadStats | None = None
        # Partitions whose files failed (log_offline): at load, or at runtime through take_offline.
        self._offline: dict[TopicPartition, OfflineLog] = {}
        self._failed_logs: list[PartitionLog] = []  # taken offline at runtime: fds kept until shutdown
        self._unclean_dirs: set[str] = set()  # no clean-shutdown marker for these
        # Told (on the loop) of each partition take_offline takes away: the ReplicaManager drops it.
        self.on_offline: Callable[[OfflineLog], None] | None = None
        # Serving while a crash's logs load (load_first / load_rest): partitions not installed yet, by
        # the job that opens them; opened on a loader thread, waiting for the loop to install them.
        self._loading: dict[TopicPartition, LoadJob] = {}
        self._opened: dict[TopicPartition, tuple[str, OpenRequest, OpenResult]] = {}
        self._stop_loading = threading.Event()
        self._loaders: list[threading.Thread] = []
        self._load_started = 0.0
        self._loading_total = 0
        # Told (on the loop) of each partition load_rest installed: its log, or None if it went offline.
        self.on_loaded: Callable[[TopicPartition, PartitionLog | None], None] | None = None

    # ---- start and stop -------------------------------------------------------------------------

    def load(self) -> None:
        """Blocking: call in executor. Open every partition of every log dir (recovering after a crash)."""
        started = time.monotonic()
        jobs, clean_dirs = self._scan()
        self._install_all(jobs, self._open_many(jobs))
        self._loaded_stats(jobs, clean_dirs, started)

    def load_first(self, first: Callable[[str], bool]) -> list[LoadJob]:
        """Blocking: call in executor. `load` for a start that serves while the logs of a crash load.

        Opens now the partitions that need no recovery (their dir has its clean-shutdown marker) and
        those of the topics `first` names (the coordinators' internal topics, read before serving).
        The others are returned and stay registered as loading: checkpointed with the offsets they were loaded with, never created
        anew, until `load_rest` opens them.
        """
        started = time.monotonic()
        jobs, clean_dirs = self._scan()
        now = [j for j in jobs if not j[1].recover or first(j[1].topic)]
        rest = [j for j in jobs if j[1].recover and not first(j[1].topic)]
        self._install_all(now, self._open_many(now))
        self._loaded_stats(now, clean_dirs, started)
        with self._lock:
            for d, req in rest:
                self._loading[(req.topic, req.partition)] = (d, req)
        self._load_started, self._loading_total = started, len(rest)
        return rest

    def load_rest(self, jobs: list[LoadJob], deliver: Callable[[Callable[[], None]], object]) -> None:
        """Blocking: call on a thread of its own. Open `jobs` (from load_first) on the recovery threads;
        each opened log is handed to `deliver` (the loop's call_soon_threadsafe) to be installed on the
        loop, where `on_loaded` hears of it. `shutdown` stops what has not started yet. The least to
        recover loads (and serves) first."""
        threads = max(1, min(len(jobs), self.config.num_recovery_threads * len(self._dirs)))
        todo = iter(sorted(jobs, key=_recovery_work))

        def worker() -> None:
            while not self._stop_loading.is_set():
                with self._lock:
                    job = next(todo, None)
                if job is None:
                    return
                d, req = job
                _hold_for_test(req, self._stop_loading)
                result = self._open_or_fail(req)
                with self._lock:
                    self._opened[(req.topic, req.partition)] = (d, req, result)
                try:
                    deliver(functools.partial(self._install_loaded, req.topic, req.partition))
                except RuntimeError:  # the loop is closed: shutdown installs (and closes) it
                    return

        workers = [threading.Thread(target=worker, name=f"log-load-{i}", daemon=True) for i in range(threads)]
        with self._lock:  # _stop_loader joins exactly the workers started before it stopped the load
            if self._stop_loading.is_set():
                return
            for w in workers:
                w.start()
            self._loaders = workers
        for w in workers:
            w.join()

    def loading(self) -> list[OpenRequest]:
        """The partitions load_first left to load_rest that are not installed yet."""
        with self._lock:
            return [req for _, req in self._loading.values()]

    def _install_loaded(self, topic: str, partition: int) -> None:
        """On the loop: install one log load_rest opened (unless shutdown took it first)."""
        tp = (topic, partition)
        with self._lock:  # held while installing: shutdown's list of logs to close has it, or took it
            opened = self._opened.pop(tp, None)
            if opened is None:
                return
            del self._loading[tp]
            left = len(self._loading)
            d, req, result = opened
            self._install_all([(d, req)], [result])
        plog = self._logs.get(tp)
        if plog is not None:
            plog.config = self._config_of(topic)  # a dynamic default that changed while it loaded
        if self.on_loaded is not None:
            self.on_loaded(tp, plog)
        if not left:
            log.info(
                "loaded %d more partitions behind the listeners, %.3f s after the logs began loading",
                self._loading_total,
                time.monotonic() - self._load_started,
            )

    def _config_of(self, topic: str) -> LogConfig:
        overrides = self._overrides.get(topic)
        return self.default_log_config.with_overrides(overrides) if overrides else self.default_log_config

    def _stop_loader(self) -> list[tuple[str, OpenRequest, OpenResult]]:
        """Blocking (shutdown): stop load_rest, wait for the opens in progress; what was opened but not
        installed yet is returned, and the dirs of partitions never opened get no clean marker."""
        with self._lock:
            self._stop_loading.set()
            loaders = list(self._loaders)
        for w in loaders:
            w.join()
        with self._lock:
            opened = list(self._opened.values())
            self._opened.clear()
            for tp in [(req.topic, req.partition) for _, req, _ in opened]:
                self._loading.pop(tp, None)
            for d, _req in self._loading.values():  # never recovered: the next start must
                self._unclean_dirs.add(d)
        return opened

    def _scan(self) -> tuple[list[LoadJob], int]:
        """Blocking: the clean markers (noted, then deleted), the checkpoints and every partition dir."""
        jobs: list[LoadJob] = []
        clean_dirs = 0
        for d in self._dirs:
            path = Path(d)
            path.mkdir(parents=True, exist_ok=True)
            marker = path / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            if clean:
                clean_dirs += 1
                marker.unlink()  # a crash from here on must count as unclean (KAFKA-10471)
                # ... a power loss too: an unlink the directory never synced comes back with the power,
                # and the marker would then vouch for segments written after this start.
                checkpoints.fsync_dir(path)
            recovery = _read_checkpoint(path / RECOVERY_POINT_CHECKPOINT)
            if recovery is None:  # torn: recover every partition of the dir from its start
                recovery, clean = {}, False
            starts = _read_checkpoint(path / LOG_START_OFFSET_CHECKPOINT) or {}
            hws = _read_checkpoint(path / REPLICATION_OFFSET_CHECKPOINT) or {}
            for entry in os.scandir(path):
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if entry.name.endswith(DELETE_DIR_SUFFIX) or entry.name.endswith(".deleted"):
                    self._queue(0, d, 0, _rmtree_action(Path(entry.path)))  # nothing reads it: due now
                    continue
                if entry.name.endswith(IGNORED_DIR_SUFFIXES):
                    log.warning("log dir %s: leaving %s alone (not a live partition)", d, entry.name)
                    continue
                tp = parse_partition_dir(entry.name)
                if tp is None:
                    log.warning("log dir %s: ignoring %s (not <topic>-<partition>)", d, entry.name)
                    continue
                jobs.append(
                    (
                        d,
                        OpenRequest(
                            path=Path(entry.path),
                            topic=tp[0],
                            partition=tp[1],
                            config=self.default_log_config,  # replaced by _open_one after reading overrides
                            recovery_point=recovery.get(tp, 0),
                            log_start_offset=starts.get(tp, 0),
                            high_watermark=hws.get(tp, 0),
                            recover=not clean,
                        ),
                    )
                )
        seen: dict[TopicPartition, str] = {}
        for d, req in jobs:
            tp = (req.topic, req.partition)
            if tp in seen:
                raise KafkaError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"partition {req.topic}-{req.partition} exists in two log dirs: {seen[tp]} and {d}",
                )
            seen[tp] = d
        return jobs, clean_dirs

    def _open_many(self, jobs: list[LoadJob]) -> list[OpenResult]:
        if not jobs:
            return []
        threads = max(1, min(len(jobs), self.config.num_recovery_threads * len(self._dirs)))
        with ThreadPoolExecutor(threads, thread_name_prefix="log-load") as pool:
            return list(pool.map(self._open_or_fail, (req for _, req in jobs)))

    def _install_all(self, jobs: list[LoadJob], opened: list[OpenResult]) -> None:
        for (d, req), result in zip(jobs, opened, strict=True):
            tp = (req.topic, req.partition)
            if isinstance(result, Exception):
                off = OfflineLog(
                    req.topic,
                    req.partition,
                    d,
                    failed_file(result, req.path),
                    describe(result),
                    req.recovery_point,
                    req.log_start_offset,
                    req.high_watermark,
                )
                self._record_offline(off, "cannot load", result)
                continue
            plog, overrides = result
            plog.write_gate = self.write_gate
            self._dir_of[tp] = d  # first: a checkpoint thread reads _logs, then _dir_of
            self._logs[tp] = plog
            if overrides:
                self._overrides.setdefault(req.topic, overrides)

    def _loaded_stats(self, jobs: list[LoadJob], clean_dirs: int, started: float) -> None:
        self.load_stats = LoadStats(
            partitions=len(jobs),
            recovered=sum(1 for _, r in jobs if r.recover),
            clean_dirs=clean_dirs,
            seconds=time.monotonic() - started,
        )
        log.info(
            "loaded %d partitions from %d log dirs (%d clean) in %.3f s, %d recovered, %d offline",
            len(jobs) - len(self._offline),
            len(self._dirs),
            clean_dirs,
            self.load_stats.seconds,
            self.load_stats.recovered,
            len(self._offline),
        )

    def _open_or_fail(self, req: OpenRequest) -> OpenResult:
        """Blocking: `_open_one`, or what made it fail (that partition goes offline, not the broker)."""
        try:
            return self._open_one(req)
        except Exception as exc:  # whatever a damaged disk raises: OSError, KafkaError, mmap's ValueError
            return exc

    def _record_offline(self, off: OfflineLog, what: str, exc: BaseException) -> None:
        self._offline[(off.topic, off.partition)] = off
        log.error(
            "partition %s-%d is offline (KAFKA_STORAGE_ERROR): %s %s: %s",
            off.topic,
            off.partition,
            what,
            off.path,
            off.reason,
        )
        log.debug("partition %s-%d went offline", off.topic, off.partition, exc_info=exc)

    def take_offline(
        self, topic: str, partition: int, exc: BaseException, *, notify: bool = True
    ) -> OfflineLog | None:
        """Loop-safe: a runtime I/O error on this partition's files takes it offline (log_offline).

        Its fds stay open until shutdown (a sendfile in flight must not see a reused fd), nothing is
        written to its files again, and its log dir gets no clean-shutdown marker. `on_offline` (the
        ReplicaManager) hears of it unless `notify` is False (shutdown, off the loop). Returns the
        record (None for a partition this broker does not have).
        """
        tp = (topic, partition)
        plog = self._logs.pop(tp, None)
        if plog is None:
            return self._offline.get(tp)
        d = self._dir_of.pop(tp)
        self._failed_logs.append(plog)
        self._unclean_dirs.add(d)
        off = OfflineLog(
            topic,
            partition,
            d,
            failed_file(exc, plog.directory),
            describe(exc),
            plog.recovery_point,
            plog.log_start_offset,
            plog.high_watermark,
        )
        self._record_offline(off, "I/O error on", exc)
        if notify and self.on_offline is not None:
            self.on_offline(off)
        return off

    def _fail_each(self, results: Iterable[tuple[PartitionLog, Exception | None]]) -> None:
        for plog, exc in list(results):
            if exc is not None:
                self.take_offline(plog.topic, plog.partition, exc, notify=False)

    def offline(self, topic: str, partition: int) -> OfflineLog | None:
        return self._offline.get((topic, partition))

    def offline_logs(self) -> list[OfflineLog]:
        return list(self._offline.values())

    def _open_one(self, req: OpenRequest) -> tuple[PartitionLog, dict[str, str]]:
        overrides = read_topic_overrides(req.path)
        config = self.default_log_config.with_overrides(overrides) if overrides else self.default_log_config
        return self._opener(_replace_config(req, config), self._clock), overrides

    def shutdown(self) -> None:
        """Blocking: call in executor. Flush and close every log, write checkpoints, then the clean markers."""
        late = self._stop_loader()
        with self._lock:  # an install running on the loop now finishes first (_install_loaded)
            if late:
                self._install_all([(d, req) for d, req, _ in late], [r for _, _, r in late])
            items = list(self._logs.values())
        threads = max(1, min(len(items), self.config.num_recovery_threads * len(self._dirs)))
        with ThreadPoolExecutor(threads, thread_name_prefix="log-close") as pool:
            self._fail_each(pool.map(attempt(lambda plog: plog.flush()), items))
        self.checkpoint_all()
        with ThreadPoolExecutor(threads, thread_name_prefix="log-close") as pool:
            self._fail_each(
                pool.map(attempt(lambda plog: plog.close()), items)
            )  # also reaps deleted segments
        for plog in self._failed_logs:
            with contextlib.suppress(OSError):
                plog.release()
        # Nothing reads deleted topics any more: remove them now rather than at the next start.
        with self._lock:
            pending, self._pending, self._freed = self._pending, [], []
        self.run_deletions([p.action for p in pending])
        for d in self._dirs:
            if d in self._unclean_dirs:
                log.warning(
                    "log dir %s: no clean-shutdown marker (a partition failed or never loaded): recovery at start",
                    d,
                )
                continue
            try:
                checkpoints.write_atomic(Path(d) / CLEAN_SHUTDOWN_FILE, b"")
            except OSError as exc:  # a read-only or failed disk: the next start recovers, that is all
                log.error("log dir %s: cannot write the clean-shutdown marker: %s", d, describe(exc))
        self._logs.clear()
        self._dir_of.clear()
        log.info("log manager shut down cleanly (%d partitions)", len(items))

    def checkpoint_all(self) -> None:
        """Blocking: call in executor. Write the three offset checkpoints of every log dir (serialized:
        the storage and the replication timers both call it, and two writers would share a temp file)."""
        with self._checkpoint_lock:
            self._checkpoint_all()

    def checkpoint_recovery_points(self) -> None:
        """Blocking: call in executor. Write only the recovery-point checkpoint of every log dir (after
        the background flusher moved recovery points; the other two keep their own timer)."""
        with self._checkpoint_lock:
            self._checkpoint_all(everything=False)

    def _checkpoint_all(self, *, everything: bool = True) -> None:
        per_dir: dict[str, list[tuple[TopicPartition, Offsets]]] = {d: [] for d in self._dirs}
        with self._lock:  # first: one installed meanwhile is then in the logs below
            loading = list(self._loading.values())
        logs = dict(self._logs)
        for tp, plog in logs.items():
            d = self._dir_of.get(tp)  # None: taken offline meanwhile (then in _offline below)
            if d is not None:
                per_dir[d].append((tp, plog))
        for tp, off in list(self._offline.items()):  # what was last known, not forgotten
            per_dir[off.log_dir].append((tp, off))
        for d, req in loading:  # not opened yet: what its dir said at the start
            tp = (req.topic, req.partition)
            if tp not in logs and tp not in self._offline:
                per_dir[d].append((tp, req))
        for d, entries in per_dir.items():
            path = Path(d)
            try:
                checkpoints.write_offsets(
                    path / RECOVERY_POINT_CHECKPOINT, {tp: p.recovery_point for tp, p in entries}
                )
                if not everything:
                    continue
                checkpoints.write_offsets(
                    path / LOG_START_OFFSET_CHECKPOINT, {tp: p.log_start_offset for tp, p in entries}
                )
                checkpoints.write_offsets(
                    path / REPLICATION_OFFSET_CHECKPOINT, {tp: p.high_watermark for tp, p in entries}
                )
            except OSError as exc:  # the other dirs still get theirs; this one recovers at start
                self._unclean_dirs.add(d)
                log.error("log dir %s: cannot write its checkpoints: %s", d, describe(exc))

    # ---- partitions and topics ------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def delete_partition(self, topic: str, partition: int) -> None:
        """One partition of delete_topic (a replica moved off this broker): renamed now, removed later."""
        tp = (topic, partition)
        plog = self._logs.pop(tp, None)
        if plog is None:
            self._delete_offline(tp)
            return
        d = self._dir_of.pop(tp)
        src = Path(d) / f"{topic}-{partition}"
        dst = Path(d) / f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.rename(src, dst)
        now = self._clock.monotonic_ms()
        self._queue(now + plog.config.file_delete_delay_ms, d, plog.size_bytes, _close_and_rmtree(plog, dst))

    def _delete_offline(self, tp: TopicPartition) -> None:
        off = self._offline.pop(tp, None)
        if off is None:
            return
        src = Path(off.log_dir) / f"{tp[0]}-{tp[1]}"
        dst = Path(off.log_dir) / f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        try:
            os.rename(src, dst)
        except OSError as exc:  # the disk that failed it; the dir stays (and loads, or not, at start)
            log.warning("cannot rename offline %s for deletion: %s", src, exc)
            return
        self._queue(self._clock.monotonic_ms(), off.log_dir, 0, _rmtree_action(dst))

    def create_partition(
        self, topic: str, partition: int, overrides: Mapping[str, str] | None = None
    ) -> PartitionLog:
        """Open the partition's log, creating its dir in the log dir with the fewest partitions.

        Existing partitions are returned as they are. Given `overrides` become the topic's overrides.
        Does small filesystem work (mkdir, and an atomic write when the topic has overrides).
        """
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        off = self._offline.get(tp)
        if off is not None:  # its files are still there: never shadow them with a new log
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{partition} is offline: {off.reason}")
        if tp in self._loading:  # the same: its log is being recovered
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} is still loading")
        validate_topic_name(topic)
        if partition < 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"partition {partition} of {topic} is negative")
        topic_overrides = dict(overrides) if overrides else self._overrides.get(topic, {})
        config = (
            self.default_log_config.with_overrides(topic_overrides)
            if topic_overrides
            else self.default_log_config
        )
        counts = dict.fromkeys(self._dirs, 0)
        for d in self._dir_of.values():
            counts[d] += 1
        chosen = min(self._dirs, key=lambda d: counts[d])  # ties: first in log.dirs order
        path = Path(chosen) / f"{topic}-{partition}"
        path.mkdir(parents=True, exist_ok=True)
        if topic_overrides and not overrides:
            write_topic_overrides(path, topic_overrides)  # inherited: this dir needs the file too
        plog = self._opener(
            OpenRequest(
                path,
                topic,
                partition,
                config,
                recovery_point=0,
                log_start_offset=0,
                high_watermark=0,
                recover=False,
            ),
            self._clock,
        )
        plog.write_gate = self.write_gate
        self._logs[tp] = plog
        self._dir_of[tp] = chosen
        if overrides:
            self._apply_overrides(topic, topic_overrides, config)  # the topic's other partitions follow
        return plog

    def delete_topic(self, topic: str) -> None:
        """Take the topic's partitions away now; their dirs are renamed `*-delete` and removed later.

        Renames are metadata-only; closing and removing the files is handed out by `collect_deletions`
        after file.delete.delay.ms (in-flight reads keep working until then).
        """
        for p in self.partitions_of(topic):
            self.delete_partition(topic, p)
        for tp in [tp for tp in self._offline if tp[0] == topic]:
            self.delete_partition(*tp)
        self._overrides.pop(topic, None)

    def topics(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for topic, _ in self._logs:
            out[topic] = out.get(topic, 0) + 1
        return out

    def partitions_of(self, topic: str) -> list[int]:
        # over a copy of the keys: a config change calls this on an executor thread while the loop
        # may create or delete partitions
        return sorted(p for t, p in list(self._logs) if t == topic)

    def logs(self) -> Iterator[PartitionLog]:
        """Every open log (a snapshot: partitions may come and go while the caller iterates)."""
        return iter(list(self._logs.values()))

    def partition_logs(self) -> list[tuple[TopicPartition, PartitionLog]]:
        """Every open log with its (topic, partition), as a snapshot list."""
        return list(self._logs.items())

    # ---- topic overrides ------------------------------------------------------------------------

    def topic_overrides(self, topic: str) -> dict[str, str]:
        return dict(self._overrides.get(topic, {}))

    def set_topic_overrides(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        """Blocking (one small atomic write per partition dir): replace the topic's overrides.

        Validates first (KafkaError(INVALID_CONFIG)), persists, then applies the new LogConfig to the
        topic's open logs. Returns that config.
        """
        validate_topic_name(topic)
        config = self.default_log_config.with_overrides(overrides)
        self._apply_overrides(topic, dict(overrides), config)
        return config

    def set_default_log_config(self, config: LogConfig) -> None:
        """Loop-safe (no I/O): new broker-level topic defaults (a dynamic broker config); every open log
        takes them, under its topic's overrides."""
        self.default_log_config = config
        for (topic, _p), plog in self._logs.items():
            overrides = self._overrides.get(topic)
            plog.config = config.with_overrides(overrides) if overrides else config

    def _apply_overrides(self, topic: str, overrides: dict[str, str], config: LogConfig) -> None:
        """Blocking: persist in every partition dir of the topic, then switch its logs to `config`.

        A topic with no partition here keeps its overrides in memory only (cluster mode keeps them
        in ZooKeeper anyway).
        """
        for p in self.partitions_of(topic):
            d = self._dir_of.get((topic, p))
            if d is not None:  # else deleted meanwhile
                with contextlib.suppress(FileNotFoundError):  # its dir renamed away meanwhile
                    write_topic_overrides(Path(d) / f"{topic}-{p}", overrides)
        if overrides:
            self._overrides[topic] = overrides
        else:
            self._overrides.pop(topic, None)
        for p in self.partitions_of(topic):
            plog = self._logs.get((topic, p))
            if plog is not None:
                plog.config = config

    # ---- writes ---------------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Loop-safe, cheap: KafkaError(KAFKA_STORAGE_ERROR) while the disk budget blocks writes."""
        self.budget.check_writable()

    def append(
        self,
        topic: str,
        partition: int,
        records: memoryview,
        *,
        leader_epoch: int,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """PartitionLog.append behind the disk-budget gate; KafkaError(UNKNOWN_TOPIC_OR_PARTITION) if absent."""
        self.budget.check_writable()
        plog = self._logs.get((topic, partition))
        if plog is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} is not on this broker"
            )
        return plog.append(records, leader_epoch=leader_epoch, now_ms=now_ms, origin=origin)


def _read_checkpoint(path: Path) -> dict[TopicPartition, int] | None:
    """Blocking: an offset checkpoint; None (with a WARNING) if it is torn."""
    try:
        return checkpoints.read_offsets(path)
    except OSError as exc:  # unreadable (EIO): the same as torn
        log.warning("%s: %s; rebuilding what it held", path, describe(exc))
        return None
    except KafkaError as exc:
        log.warning(
            "%s; rebuilding what it held (a dir whose recovery points are lost recovers in full)", exc.message
        )
        return None


def _recovery_work(job: LoadJob) -> int:
    """Blocking, cheap (one scandir): the bytes recovery may have to read, the segments from the one
    holding the recovery point on; what loads first, serves first."""
    req = job[1]
    try:
        with os.scandir(req.path) as entries:
            logs = sorted(
                (int(e.name[:20]), e.stat().st_size)
                for e in entries
                if e.name.endswith(".log") and e.name[:20].isdigit()
            )
    except OSError:
        return 0
    nexts = [base for base, _ in logs[1:]] + [2**63]
    return sum(size for (_, size), nxt in zip(logs, nexts, strict=True) if nxt > req.recovery_point)


def _hold_for_test(req: OpenRequest, stop: threading.Event) -> None:
    """HOLD_LOAD_ENV (tests only): wait while `<topic>-<partition>.hold` exists there (or until shutdown)."""
    hold_dir = os.environ.get(HOLD_LOAD_ENV)
    if not hold_dir:
        return
    hold = Path(hold_dir) / f"{req.topic}-{req.partition}.hold"
    while hold.exists() and not stop.wait(0.01):
        pass


def _replace_config(req: OpenRequest, config: LogConfig) -> OpenRequest:
    if req.config is config:
        return req
    return replace(req, config=config)


def _rmtree_action(path: Path) -> Callable[[], None]:
    def run() -> None:
        import shutil  # on first deletion: shutil pulls in bz2 and lzma, ~0.6 MB no idle broker needs

        shutil.rmtree(path, ignore_errors=True)

    return run


def _close_and_rmtree(plog: PartitionLog, path: Path) -> Callable[[], None]:
    def run() -> None:
        import shutil  # see _rmtree_action

        try:
            release_deleted_log(plog)
        finally:
            shutil.rmtree(path, ignore_errors=True)

    return run
