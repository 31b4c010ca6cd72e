"""Prometheus metrics of the broker, named after Kafka's JMX beans as the JMX exporter renders them.

How it works: one private `CollectorRegistry` per `BrokerMetrics` (never the process-global one, so
tests and several brokers in one process do not collide). Two kinds of metric:

* pushed by the hot path: counters and histograms updated by `record_produce`, `record_fetch`,
  `record_request`, ... . Each keeps a dict of labelled children so a call costs one dict lookup plus
  prometheus_client's locked add, never a label resolution.
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
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kafkad.protocol import ApiKey

log = logging.getLogger(__name__)

# Milliseconds, like Kafka's RequestMetrics TotalTimeMs; long-poll fetches end near fetch.max.wait.ms.
REQUEST_TIME_MS_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

T = TypeVar("T")
LogSizes = Callable[[], Iterable[tuple[str, int, int]]]  # (topic, partition, size in bytes)


class _ApiRecorder:
    """One API's request-time histogram and request counter, updated without prometheus_client's
    per-call checks and linear bucket scan: a bisect picks the bucket, then the same locked value
    increments `Histogram.observe` and `Counter.inc` do. Falls back to those public methods if the
    library's internals are not the ones this was written against."""

    __slots__ = ("_bounds", "_buckets", "_count_inc", "_hist", "_requests", "_sum_inc")

    def __init__(self, hist: Histogram, requests: Counter) -> None:
        self._hist, self._requests = hist, requests
        try:
            self._bounds: list[float] | None = list(hist._upper_bounds)
            self._buckets = [b.inc for b in hist._buckets]
            self._sum_inc = hist._sum.inc
            self._count_inc = requests._value.inc
            if len(self._buckets) != len(self._bounds) or self._bounds[-1] != float("inf"):
                raise AttributeError("unexpected histogram layout")
        except AttributeError:
            self._bounds = None

    def record(self, ms: float) -> None:
        if self._bounds is None:
            self._hist.observe(ms)
            self._requests.inc()
            return
        self._sum_inc(ms)
        self._buckets[bisect.bisect_left(self._bounds, ms)](1)
        self._count_inc(1)


class BrokerMetrics:
    """The broker's metrics. Hot-path methods are cheap; the daemon binds state sources once."""

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=True) if registry is None else registry
        r = self.registry
        self._bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes appended by produce requests.",
            ["topic"],
            registry=r,
        )
        self._bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Bytes sent in fetch responses.",
            ["topic"],
            registry=r,
        )
        self._messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended by produce requests.",
            ["topic"],
            registry=r,
        )
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
        self._requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests handled, by API.", ["request"], registry=r
        )
        self._errors = Counter(
            "kafka_network_requestmetrics_errors",
            "Error codes returned, by API and error name.",
            ["request", "error"],
            registry=r,
        )
        self._total_time = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its response being queued, in milliseconds.",
            ["request"],
            buckets=REQUEST_TIME_MS_BUCKETS,
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
        # Cached labelled children: the hot path never resolves labels.
        self._bytes_in_c: dict[str, Counter] = {}
        self._bytes_out_c: dict[str, Counter] = {}
        self._messages_in_c: dict[str, Counter] = {}
        self._failed_produce_c: dict[str, Counter] = {}
        self._failed_fetch_c: dict[str, Counter] = {}
        self._requests_c: dict[str, Counter] = {}
        self._total_time_c: dict[str, Histogram] = {}
        self._errors_c: dict[tuple[str, str], Counter] = {}
        self._api_names: dict[int, str] = {}
        self._api_recorders: dict[int, _ApiRecorder] = {}
        self._state = _BrokerStateCollector(process=process)
        r.register(self._state)

    # --- hot path --------------------------------------------------------------------------
    def record_produce(self, topic: str, nbytes: int, messages: int) -> None:
        """One partition's records appended (bytes as received, records count from the batch headers)."""
        c = self._bytes_in_c.get(topic)
        if c is None:
            c = self._bytes_in_c[topic] = self._bytes_in.labels(topic)
            self._messages_in_c[topic] = self._messages_in.labels(topic)
        c.inc(nbytes)
        self._messages_in_c[topic].inc(messages)

    def record_fetch(self, topic: str, nbytes: int) -> None:
        """Record bytes of one partition placed in a fetch response (consumers and followers)."""
        c = self._bytes_out_c.get(topic)
        if c is None:
            c = self._bytes_out_c[topic] = self._bytes_out.labels(topic)
        c.inc(nbytes)

    def record_request(self, api_name: str, seconds: float) -> None:
        """One request of API `api_name` (e.g. "Produce") answered after `seconds`."""
        h = self._total_time_c.get(api_name)
        if h is None:
            h = self._total_time_c[api_name] = self._total_time.labels(api_name)
            self._requests_c[api_name] = self._requests.labels(api_name)
        h.observe(seconds * 1000.0)
        self._requests_c[api_name].inc()

    def record_api(self, api_key: int, seconds: float) -> None:
        """Like `record_request`, keyed by the wire api key: the dispatcher's one-liner, run for every
        request, so it goes straight to the children's values (`_ApiRecorder`)."""
        rec = self._api_recorders.get(api_key)
        if rec is None:
            name = self._api_names.get(api_key)
            if name is None:
                name = self._api_names[api_key] = api_label(api_key)
            self.record_request(name, seconds)
            self._api_recorders[api_key] = _ApiRecorder(self._total_time_c[name], self._requests_c[name])
            return
        rec.record(seconds * 1000.0)

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
        for family, cache in (
            (self._bytes_in, self._bytes_in_c),
            (self._bytes_out, self._bytes_out_c),
            (self._messages_in, self._messages_in_c),
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

    def exposition(self) -> bytes:
        """The text format, as served on /metrics."""
        return generate_latest(self.registry)

    def start_loop_lag_monitor(self, interval: float = 0.5) -> asyncio.Task[None]:
        """Start measuring event loop lag on the running loop; cancel the task at shutdown."""
        monitor = LoopLagMonitor(self.loop_lag, self.loop_lag_last, interval)
        return asyncio.get_running_loop().create_task(monitor.run(), name="loop-lag")


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
