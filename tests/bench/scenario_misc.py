"""End-to-end latency at fixed rates (measurement 4) and recovery after kill -9 (measurement 7).

Latency: a confluent producer (acks=1, linger.ms=0) stamps each 100 B value with monotonic_ns at a fixed
rate; a confluent consumer tailing the partition subtracts it on arrival. The baseline is what the
transport alone costs: produce-to-ack latency against the sink at the same rate. Each run measures the
same load twice, once with the Python consumer and once with kcat (librdkafka in C) as the consumer (the
`e2e kcat` rows): where the two agree, the consumer is not what bounds the figure.
On a shared 2-core machine these figures are bounded by CPU contention (kafkad needs ~0.9 core at 10k
msg/s unbatched): each row carries the load average and, from /proc schedstat, how long kafkad and the
two clients were runnable but waiting for a CPU during the runs, so a miss can be told apart from a
slow broker.

Recovery: a second kafkad with `recovery_bytes` in `recovery_partitions` partitions is killed with
SIGKILL and started again; the figure is spawn to serving (the "started" log line and a TCP connect),
and a second row spawn to every partition loaded (after a crash a standalone broker serves while the
logs that need recovery load behind its listeners). The baseline is a clean restart (SIGTERM, then
start) of the same data.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from typing import Any

from tests.bench.context import Context, GiB
from tests.bench.jobs import sched_delta, sched_self
from tests.bench.raw_client import bulk_load
from tests.bench.scenario_memory import _bytecode_cached as bytecode_cached
from tests.bench.servers import create_topic, start_broker
from tests.bench.stats import Row, figure, percentile, ratio
from tests.bench.stats import Target as Goal
from tests.bench.workers import Job
from tests.integration.broker_process import BrokerProcess

log = logging.getLogger(__name__)
QUANTILES = (50.0, 99.0, 99.9)


def _mark(into: list[tuple[float, float]], pid: int) -> None:
    into.append(sched_self(pid))


def _e2e_run(ctx: Context, consumer: str, rate: int, dur: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """One producer at `rate` and one consumer job (`consumer_latency` or its kcat twin) on a new
    topic; returns (consumer result, producer result) with the broker's CPU and run-queue wait."""
    topic = "latency"
    # The consumer reads the high watermark first, and consumers do not auto-create topics.
    create_topic(ctx.kafkad.bootstrap, topic, 1)
    jobs = [
        Job(
            consumer,
            {
                "bootstrap": ctx.kafkad.bootstrap,
                "topic": topic,
                "expect": int(rate * dur),
                "timeout_s": dur + 15,
                "config": {},
            },
        ),
        Job(
            "produce_rate",
            {
                "bootstrap": ctx.kafkad.bootstrap,
                "topic": topic,
                "size": 100,
                "rate": rate,
                "duration_s": dur,
                "config": _LATENCY_PRODUCER,
            },
        ),
    ]
    pid = ctx.kafkad.pid
    marks: list[tuple[float, float]] = []
    load1 = os.getloadavg()[0]
    cons, prod = ctx.pool.run(jobs, on_go=functools.partial(_mark, marks, pid)).results
    broker = sched_delta(marks[0], sched_self(pid))
    cons["waits"] = {
        "consumer": consumer,
        "load1": load1,
        "kafkad_cpu_s": broker["cpu_s"],
        "kafkad_runq_wait_s": broker["runq_wait_s"],
        "producer_runq_wait_s": prod["sched"]["runq_wait_s"],
        "consumer_runq_wait_s": cons["sched"]["runq_wait_s"],
    }
    log.info(
        "latency %d/s %s: %s",
        rate,
        consumer,
        {k: v if isinstance(v, str) else round(v, 2) for k, v in cons["waits"].items()},
    )
    if len(cons["e2e_ms"]) < rate * dur * 0.99:
        log.warning(
            "latency %d/s: %s saw %d of %d records", rate, consumer, len(cons["e2e_ms"]), int(rate * dur)
        )
    return cons, prod


_LATENCY_PRODUCER = {"acks": "1", "linger.ms": 0}
# Issue 21 item 6: p99 at 10k and 50k msg/s, for both consumers (the kcat row shows the broker's share).
_LATENCY_GOALS = {10_000: 2.0, 50_000: 10.0}
_CONSUMERS = (("consume_latency", "e2e"), ("consume_latency_kcat", "e2e kcat"))


def latency(ctx: Context) -> None:
    curve: dict[str, dict[str, list[float]]] = {}
    for rate in ctx.settings.latency_rates:
        dur = ctx.settings.latency_s
        # per consumer, per run, one value per quantile
        e2e: dict[str, list[list[float]]] = {label: [] for _, label in _CONSUMERS}
        ack_k: list[list[float]] = []
        ack_s: list[list[float]] = []
        waits: list[dict[str, Any]] = []
        for _ in range(ctx.settings.runs):
            for consumer, label in _CONSUMERS:  # the Python consumer, then the C one, then the sink
                cons, prod = _e2e_run(ctx, consumer, rate, dur)
                waits.append(cons["waits"])
                lat = sorted(cons["e2e_ms"])
                e2e[label].append([percentile(lat, q) for q in QUANTILES])
                acks = sorted(prod["ack_ms"])
                ack_k.append([percentile(acks, q) for q in QUANTILES])
            job = Job(
                "produce_rate",
                {
                    "bootstrap": ctx.baseline.bootstrap,
                    "topic": "latency",
                    "size": 100,
                    "rate": rate,
                    "duration_s": dur,
                    "config": _LATENCY_PRODUCER,
                },
            )
            sacks = sorted(ctx.pool.run([job]).results[0]["ack_ms"])
            ack_s.append([percentile(sacks, q) for q in QUANTILES])
        curve[str(rate)] = {"e2e": [], "e2e_kcat": [], "ack": [], "sink_ack": []}
        for _, label in _CONSUMERS:
            for qi, q in enumerate(QUANTILES):
                k = figure(f"{label} p{q:g} @{rate}", "ms", [r[qi] for r in e2e[label]])
                b = figure(f"sink ack p{q:g} @{rate}", "ms", [r[qi] for r in ack_s])
                a = figure(f"ack p{q:g} @{rate}", "ms", [r[qi] for r in ack_k])
                limit = _LATENCY_GOALS.get(rate) if q == 99.0 else None
                goal = Goal("<=", limit) if limit is not None else None
                row = Row(
                    "latency",
                    f"{label} p{q:g} @ {rate} msg/s ms",
                    k,
                    b,
                    "sink produce ack",
                    ratio("", k, b),
                    goal,
                )
                row.extra["kafkad_produce_ack"] = a.as_json()
                row.extra["cpu_contention"] = waits
                ctx.rows.append(row)
                curve[str(rate)][label.replace(" ", "_")].append(k.median)
                if label == "e2e":
                    curve[str(rate)]["ack"].append(a.median)
                    curve[str(rate)]["sink_ack"].append(b.median)
    ctx.series["latency"] = {"quantiles": list(QUANTILES), "by_rate": curve}


def recovery(ctx: Context) -> None:
    # Bytecode cached as an installed package has it: an environment with PYTHONDONTWRITEBYTECODE would
    # otherwise compile every module at each start (~0.2-0.4 s here), which no deployment pays.
    with bytecode_cached(ctx.work / "pycache"):
        _recovery(ctx)


def _recovery(ctx: Context) -> None:
    s = ctx.settings
    broker = start_broker(ctx.work / "recovery", {"log.flush.offset.checkpoint.interval.ms": "60000"})
    try:
        topic = f"recovery_p{s.recovery_partitions}"
        create_topic(broker.bootstrap, topic, s.recovery_partitions)
        t0 = time.monotonic()
        asyncio.run(bulk_load("127.0.0.1", broker.port, topic, s.recovery_partitions, s.recovery_bytes, 1024))
        log.info("recovery: loaded %.1f GiB in %.1fs", s.recovery_bytes / GiB, time.monotonic() - t0)
        dirty: list[float] = []
        clean: list[float] = []
        loaded: list[float] = []
        broker.wait_loaded = False  # serving starts before a crash's logs are all loaded: time both
        for _ in range(s.runs):
            # A fresh unflushed tail in every partition before each kill, so every run has work to redo.
            asyncio.run(bulk_load("127.0.0.1", broker.port, topic, s.recovery_partitions, 64 << 20, 1024))
            broker.kill9()
            t = time.monotonic()
            broker.start()
            dirty.append(time.monotonic() - t)
            loaded.append(_wait_all_loaded(broker, t))
            broker.stop()
            t = time.monotonic()
            broker.start()
            clean.append(time.monotonic() - t)
    finally:
        if broker.running:
            broker.stop()
    k = figure("recovery", "s", dirty)
    b = figure("clean start", "s", clean)
    label = (
        f"start-to-ready after kill -9, {s.recovery_bytes / GiB:g} GiB/{s.recovery_partitions} partitions s"
    )
    ctx.rows.append(Row("recovery", label, k, b, "clean restart", ratio("", k, b), Goal("<=", 1.0)))
    a = figure("every partition loaded", "s", loaded)
    label = f"every partition loaded after kill -9, {s.recovery_bytes / GiB:g} GiB/{s.recovery_partitions} partitions s"
    ctx.rows.append(Row("recovery", label, a, b, "clean restart", ratio("", a, b)))


def _wait_all_loaded(broker: BrokerProcess, t0: float) -> float:
    """Seconds from `t0` (the spawn) until the broker logged that every partition is loaded (at once if
    its started line left none loading); polls its log like BrokerProcess.start."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = broker.log_text()
        if "; loading " not in text or "every partition is loaded" in text:
            return time.monotonic() - t0
        time.sleep(0.02)
    raise RuntimeError(f"partitions still loading after 120 s; log:\n{broker.log_text()}")


def conversion(ctx: Context) -> None:
    """Message format v0/v1 (issue 23 item 2): up-conversion against a v2 append, down-conversion against
    the zero-copy read, in process CPU time per GiB (tests/bench/bench_conversion.py), same run."""
    from tests.bench.bench_conversion import measure

    rows = measure(ctx.settings.runs, 2000, 16, 1024)
    up, append = (
        figure("up-convert", "CPU-s/GiB", rows["up-convert + append"]),
        figure("v2 append", "CPU-s/GiB", rows["v2 append"]),
    )
    down, read = (
        figure("down-convert", "CPU-s/GiB", rows["down-convert"]),
        figure("zero-copy read", "CPU-s/GiB", rows["zero-copy read"]),
    )
    ctx.rows.append(
        Row(
            "conversion",
            "Produce v0-2: up-convert + append, CPU-s/GiB",
            up,
            append,
            "v2 append",
            ratio("", up, append),
        )
    )
    ctx.rows.append(
        Row(
            "conversion",
            "Fetch v2-3: read + down-convert, CPU-s/GiB",
            down,
            read,
            "zero-copy read",
            ratio("", down, read),
        )
    )
