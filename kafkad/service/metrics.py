"""Prometheus metrics of the broker, named after Kafka's JMX beans as the JMX exporter renders them.

How it works: one private `CollectorRegistry` per `BrokerMetrics` (never the process-global one, so
tests and several brokers in one process do not collide). Two kinds of metric:

* pushed by the hot path: `record_produce`, `record_fetch`, `record_api`/`record_request` add to plain
  Python ints in `_HotSeries` (a per-topic or per-API list, one dict lookup and a few `+=` per call: no
  prometheus_client lock, no label resolution), which a collector turns into the counter and histogram
  families at scrape time. The rare ones (errors, failed requests, connections) are ordinary
  prometheus_client metrics.
* pulled at scrape time by `_BrokerStateCollector`: partition counts, log sizes, log-dir free bytes,
  process RSS/fds/CPU (psutil), read through callables the daemon binds with `bind(...)`. The scrape
  runs on the event loop (see `health.py`), so those callables may read loop-owned state without locks.

Event loop lag: `LoopLagMonitor` sleeps a fixed interval on the loop and records how late it woke up.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import psutil
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kafkad.protocol import ApiKey
from kafkad.storage.log_sync import SyncStats

log = logging.getLogger(__name__)

# Milliseconds, like Kafka's RequestMetrics TotalTimeMs; long-poll fetches end near fetch.max.wait.ms.
REQUEST_TIME_MS_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
# The `le` labels as prometheus_client writes them ("0.25", "1.0", ..., "+Inf").
_LE_LABELS = (*(repr(float(b)) for b in REQUEST_TIME_MS_BUCKETS), "+Inf")
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

T = TypeVar("T")
LogSizes = Callable[[], Iterable[tuple[str, int, int]]]  # (topic, partition, size in bytes)
OfflineLogs = Callable[[], Iterable[tuple[str, int, str]]]  # (topic, partition, the file that failed)


class BrokerMetrics:
    """The broker's metrics. Hot-path methods are cheap; the daemon binds state sources once."""

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=True) if registry is None else registry
        r = self.registry
        self._failed_produce = Counter(
            "kafka_server_brokertopicmetrics_failedproducerequests",
            "Partition produce requests answered with an error.",
            ["topic"],
            registry=r,
        )
        self._failed_fetch = Counter(
            "kafka_server_brokertopicmetrics_failedfetchrequests",
            "Partition fetch requests answered with an error.",
            ["topic"],
            registry=r,
        )
        self._errors = Counter(
            "kafka_network_requestmetrics_errors",
            "Error codes returned, by API and error name.",
            ["request", "error"],
            registry=r,
        )
        self._connections = Gauge(
            "kafka_server_socketservermetrics_connection_count", "Open client connections.", registry=r
        )
        self.loop_lag = Histogram(
            "kafkad_event_loop_lag_seconds",
            "How late a periodic event loop callback ran.",
            buckets=LOOP_LAG_BUCKETS,
            registry=r,
        )
        self.loop_lag_last = Gauge(
            "kafkad_event_loop_lag_last_seconds", "Latest event loop lag sample.", registry=r
        )
        # Cached labelled children of the rare counters: no label resolution per call.
        self._failed_produce_c: dict[str, Counter] = {}
        self._failed_fetch_c: dict[str, Counter] = {}
        self._errors_c: dict[tuple[str, str], Counter] = {}
        self._hot = _HotSeries()
        r.register(self._hot)
        self._produced = self._hot.produced
        self._fetched = self._hot.fetched
        self._by_key = self._hot.by_key
        self._bounds = REQUEST_TIME_MS_BUCKETS
        self._state = _BrokerStateCollector(process=process)
        r.register(self._state)

    # --- hot path --------------------------------------------------------------------------
    def record_produce(self, topic: str, nbytes: int, messages: int) -> None:
        """One partition's records appended (bytes as received, records count from the batch headers)."""
        series = self._produced.get(topic)
        if series is None:
            series = self._hot.topic(self._produced, topic, 2)
        series[0] += nbytes
        series[1] += messages

    def record_fetch(self, topic: str, nbytes: int) -> None:
        """Record bytes of one partition placed in a fetch response (consumers and followers)."""
        series = self._fetched.get(topic)
        if series is None:
            series = self._hot.topic(self._fetched, topic, 1)
        series[0] += nbytes

    def record_request(self, api_name: str, seconds: float) -> None:
        """One request of API `api_name` (e.g. "Produce") answered after `seconds`."""
        self._observe(self._hot.api(api_name), seconds * 1000.0)

    def record_api(self, api_key: int, seconds: float) -> None:
        """Like `record_request`, keyed by the wire api key: the dispatcher's one-liner, run for every
        request (one dict lookup, a bisect and three `+=`)."""
        series = self._by_key.get(api_key)
        if series is None:
            series = self._by_key[api_key] = self._hot.api(api_label(api_key))
        ms = seconds * 1000.0
        series[0] += 1
        series[1] += ms
        series[2 + bisect.bisect_left(self._bounds, ms)] += 1

    def _observe(self, series: list[float], ms: float) -> None:
        series[0] += 1
        series[1] += ms
        series[2 + bisect.bisect_left(self._bounds, ms)] += 1

    def record_error(self, api_name: str, error: str) -> None:
        """An error code (its Kafka name, e.g. "NOT_LEADER_OR_FOLLOWER") returned by `api_name`."""
        key = (api_name, error)
        c = self._errors_c.get(key)
        if c is None:
            c = self._errors_c[key] = self._errors.labels(api_name, error)
        c.inc()

    def record_failed_produce(self, topic: str) -> None:
        c = self._failed_produce_c.get(topic)
        if c is None:
            c = self._failed_produce_c[topic] = self._failed_produce.labels(topic)
        c.inc()

    def record_failed_fetch(self, topic: str) -> None:
        c = self._failed_fetch_c.get(topic)
        if c is None:
            c = self._failed_fetch_c[topic] = self._failed_fetch.labels(topic)
        c.inc()

    def connection_opened(self) -> None:
        self._connections.inc()

    def connection_closed(self) -> None:
        self._connections.dec()

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's series so they stop being exported."""
        self._produced.pop(topic, None)
        self._fetched.pop(topic, None)
        for family, cache in (
            (self._failed_produce, self._failed_produce_c),
            (self._failed_fetch, self._failed_fetch_c),
        ):
            if cache.pop(topic, None) is not None:
                family.remove(topic)

    # --- pulled state ----------------------------------------------------------------------
    def bind(
        self,
        *,
        partition_count: Callable[[], int] | None = None,
        leader_count: Callable[[], int] | None = None,
        under_replicated: Callable[[], int] | None = None,
        log_sizes: LogSizes | None = None,
        log_dirs: Sequence[str] | None = None,
        offline_logs: OfflineLogs | None = None,
        log_sync: SyncStats | None = None,
    ) -> None:
        """Name the sources read at scrape time, on the event loop; arguments left None stay as they were."""
        s = self._state
        if partition_count is not None:
            s.partition_count = partition_count
        if leader_count is not None:
            s.leader_count = leader_count
        if under_replicated is not None:
            s.under_replicated = under_replicated
        if log_sizes is not None:
            s.log_sizes = log_sizes
        if log_dirs is not None:
            s.log_dirs = tuple(log_dirs)
        if offline_logs is not None:
            s.offline_logs = offline_logs
        if log_sync is not None:
            s.log_sync = log_sync

    def exposition(self) -> bytes:
        """The text format, as served on /metrics."""
        return generate_latest(self.registry)

    def start_loop_lag_monitor(self, interval: float = 0.5) -> asyncio.Task[None]:
        """Start measuring event loop lag on the running loop; cancel the task at shutdown."""
        monitor = LoopLagMonitor(self.loop_lag, self.loop_lag_last, interval)
        return asyncio.get_running_loop().create_task(monitor.run(), name="loop-lag")


class _HotSeries(Collector):
    """The hot-path series as plain numbers, exported as prometheus families at scrape time.

    Loop-thread only: the hot path and the scrape (health.py) both run on the event loop, so a bare
    `+=` needs no lock. Each series is a list: per topic [bytes, records] in `produced`, [bytes] in
    `fetched`; per API [count, sum ms, one non-cumulative count per bucket of
    REQUEST_TIME_MS_BUCKETS plus +Inf]. Creation times are kept for the `_created` samples that
    prometheus_client's own counters export.
    """

    def __init__(self) -> None:
        self.produced: dict[str, list[int]] = {}
        self.fetched: dict[str, list[int]] = {}
        self.apis: dict[str, list[float]] = {}
        self.by_key: dict[int, list[float]] = {}  # api key -> the same list as apis[name]
        self.created: dict[tuple[str, str], float] = {}

    def topic(self, table: dict[str, list[int]], topic: str, width: int) -> list[int]:
        series = table[topic] = [0] * width
        self.created[(("in" if table is self.produced else "out"), topic)] = time.time()
        return series

    def api(self, name: str) -> list[float]:
        series = self.apis.get(name)
        if series is None:
            series = self.apis[name] = [0.0] * (3 + len(REQUEST_TIME_MS_BUCKETS))
            self.created[("api", name)] = time.time()
        return series

    def describe(self) -> Iterable[Metric]:
        return []  # series come and go with topics; nothing to pre-register

    def collect(self) -> Iterator[Metric]:
        created = self.created
        bytes_in = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesin", "Bytes appended by produce requests.", labels=["topic"]
        )
        messages_in = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended by produce requests.",
            labels=["topic"],
        )
        for topic, (nbytes, messages) in self.produced.items():
            ts = created.get(("in", topic))
            bytes_in.add_metric([topic], nbytes, created=ts)
            messages_in.add_metric([topic], messages, created=ts)
        bytes_out = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesout", "Bytes sent in fetch responses.", labels=["topic"]
        )
        for topic, (nbytes,) in self.fetched.items():
            bytes_out.add_metric([topic], nbytes, created=created.get(("out", topic)))
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests handled, by API.", labels=["request"]
        )
        total_time = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its response being queued, in milliseconds.",
            labels=["request"],
        )
        for name, series in self.apis.items():
            count, total = int(series[0]), series[1]
            ts = created.get(("api", name))
            requests.add_metric([name], count, created=ts)
            cumulative, buckets = 0, []
            for le, n in zip(_LE_LABELS, series[2:], strict=True):
                cumulative += int(n)
                buckets.append((le, cumulative))
            total_time.add_metric([name], buckets, total)
        yield from (bytes_in, messages_in, bytes_out, requests, total_time)


def api_label(api_key: int) -> str:
    """Kafka's request name for the `request` label: 0 -> "Produce", 2 -> "ListOffsets"."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"Api{api_key}"


class _BrokerStateCollector(Collector):
    """Values computed at scrape time from the sources bound by `BrokerMetrics.bind`."""

    def __init__(self, *, process: bool) -> None:
        self.partition_count: Callable[[], int] | None = None
        self.leader_count: Callable[[], int] | None = None
        self.under_replicated: Callable[[], int] | None = None
        self.log_sizes: LogSizes | None = None
        self.log_dirs: tuple[str, ...] = ()
        self.offline_logs: OfflineLogs | None = None
        self.log_sync: SyncStats | None = None
        self._process = psutil.Process() if process else None

    def describe(self) -> Iterable[Metric]:
        return []  # values are dynamic; nothing to pre-register

    def collect(self) -> Iterator[Metric]:
        for name, doc, fn in (
            (
                "kafka_server_replicamanager_partitioncount",
                "Partitions hosted by this broker.",
                self.partition_count,
            ),
            ("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", self.leader_count),
            (
                "kafka_server_replicamanager_underreplicatedpartitions",
                "Led partitions whose ISR is smaller than the replica set.",
                self.under_replicated,
            ),
        ):
            if fn is not None:
                value = _safe(fn, name)
                if value is not None:
                    yield GaugeMetricFamily(name, doc, value=value)
        if self.log_sizes is not None:
            sizes = GaugeMetricFamily(
                "kafka_log_log_size", "Bytes on disk of one partition's log.", labels=["topic", "partition"]
            )
            entries = _safe(lambda: list(self.log_sizes() if self.log_sizes else ()), "kafka_log_log_size")
            for topic, partition, size in entries or ():
                sizes.add_metric([topic, str(partition)], size)
            yield sizes
        if self.offline_logs is not None:
            yield from self._offline(self.offline_logs)
        if self.log_sync is not None:
            yield from self._log_sync(self.log_sync)
        if self.log_dirs:
            free = GaugeMetricFamily(
                "kafka_log_dir_free_bytes", "Free bytes on a log dir's filesystem.", labels=["dir"]
            )
            total = GaugeMetricFamily(
                "kafka_log_dir_total_bytes", "Size of a log dir's filesystem.", labels=["dir"]
            )
            for d in self.log_dirs:
                try:
                    st = os.statvfs(d)
                except OSError:
                    continue  # an offline dir exports nothing rather than a bogus zero
                free.add_metric([d], st.f_bavail * st.f_frsize)
                total.add_metric([d], st.f_blocks * st.f_frsize)
            yield free
            yield total
        if self._process is not None:
            yield from self._process_metrics(self._process)

    @staticmethod
    def _log_sync(stats: SyncStats) -> Iterator[Metric]:
        """The group commit's counters (storage/log_sync.py): records per fsync = records / fsyncs."""
        for name, doc, value in (
            (
                "kafkad_log_sync_jobs",
                "Group-commit jobs run (one thread walk over a disk's logs).",
                stats.jobs,
            ),
            ("kafkad_log_fsyncs", "Partition log flushes that made new messages durable.", stats.fsyncs),
            ("kafkad_log_fsync_records", "Messages made durable by those flushes.", stats.records),
            ("kafkad_log_fsync_failures", "Partition log flushes that failed.", stats.failures),
        ):
            yield CounterMetricFamily(name, doc, value=value)

    @staticmethod
    def _offline(source: OfflineLogs) -> Iterator[Metric]:
        """Partitions whose files failed (storage/log_offline.py): Kafka's OfflineReplicaCount, and
        one series per partition naming the file."""
        entries = _safe(lambda: list(source()), "kafkad_log_offline_partition") or []
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_offlinereplicacount",
            "Partitions of this broker taken offline by a storage error.",
            value=len(entries),
        )
        each = GaugeMetricFamily(
            "kafkad_log_offline_partition",
            "1 for each partition taken offline by a storage error, with the file that failed.",
            labels=["topic", "partition", "path"],
        )
        for topic, partition, path in entries:
            each.add_metric([topic, str(partition), path], 1)
        yield each

    @staticmethod
    def _process_metrics(p: psutil.Process) -> Iterator[Metric]:
        with p.oneshot():
            rss = p.memory_info().rss
            fds = p.num_fds()
            cpu = p.cpu_times()
            threads = p.num_threads()
        yield GaugeMetricFamily("process_resident_memory_bytes", "Resident set size in bytes.", value=rss)
        yield GaugeMetricFamily("process_open_fds", "Open file descriptors.", value=fds)
        yield GaugeMetricFamily("process_threads", "OS threads of the process.", value=threads)
        yield CounterMetricFamily(
            "process_cpu_seconds", "User and system CPU time.", value=cpu.user + cpu.system
        )
        soft, _hard = _nofile_limit()
        if soft > 0:
            yield GaugeMetricFamily("process_max_fds", "Soft limit on open file descriptors.", value=soft)


def _nofile_limit() -> tuple[int, int]:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)


def _safe(fn: Callable[[], T], name: str) -> T | None:
    # A broken source must not take the whole scrape down with it.
    try:
        return fn()
    except Exception:
        log.exception("metrics source for %s failed", name)
        return None


class LoopLagMonitor:
    """Sleeps `interval` on the loop again and again; the oversleep is the loop's lag."""

    def __init__(
        self,
        histogram: Histogram,
        last: Gauge,
        interval: float = 0.5,
        *,
        now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._histogram = histogram
        self._last = last
        self._interval = interval
        self._now = now
        self._sleep = sleep

    async def run(self) -> None:
        while True:
            start = self._now()
            await self._sleep(self._interval)
            lag = max(0.0, self._now() - start - self._interval)
            self._histogram.observe(lag)
            self._last.set(lag)
