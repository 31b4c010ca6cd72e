"""Produce scenarios: throughput and CPU cost (confluent-kafka producers), small requests (raw client),
throughput and memory against partition count. Each run measures kafkad and the sink back to back
(alternating which goes first), so ratios are taken within a run.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass
from typing import Any

from tests.bench.context import Context, GiB, RssSampler
from tests.bench.servers import CpuMeter, Target, create_topic
from tests.bench.stats import Row, figure, percentile, ratio
from tests.bench.stats import Target as Goal
from tests.bench.workers import Job

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Sample:
    records_per_s: float
    mb_per_s: float
    cpu_per_gib: float
    peak_rss: int = 0


def _confluent_job(ctx: Context, target: Target, topic: str, size: int, config: dict[str, Any]) -> Job:
    return Job(
        "produce_throughput",
        {
            "bootstrap": target.bootstrap,
            "topic": topic,
            "size": size,
            "duration_s": ctx.settings.produce_s,
            "config": config,
        },
    )


def _produce_once(
    ctx: Context,
    target: Target,
    topic: str,
    size: int,
    producers: int,
    config: dict[str, Any],
    rss: bool = False,
) -> Sample:
    if "raw_batch_bytes" in config:
        raw = Job(
            "raw_produce_throughput",
            {
                "port": target.port,
                "topic": topic,
                "connections": producers,
                "duration_s": ctx.settings.produce_s,
                "size": size,
                "batch_bytes": config["raw_batch_bytes"],
                "acks": -1 if config["acks"] == "all" else int(config["acks"]),
            },
        )
        jobs = [raw]
    else:
        jobs = [_confluent_job(ctx, target, topic, size, config)] * producers
    meter = CpuMeter(target)
    sampler = RssSampler(target) if rss else None
    if sampler:
        sampler.__enter__()
    res = ctx.pool.run(jobs, on_go=meter.start)
    meter.stop()
    if sampler:
        sampler.__exit__()
    nbytes = sum(r["bytes"] for r in res.results)
    records = sum(r["records"] for r in res.results)
    errors = sum(r["errors"] for r in res.results)
    if errors:
        log.warning("%s: %d delivery errors", target.name, errors)
    return Sample(
        records / res.wall_s,
        nbytes / res.wall_s / 1e6,
        meter.seconds / (nbytes / GiB) if nbytes else float("inf"),
        sampler.peak if sampler else 0,
    )


def _pairs(
    ctx: Context,
    topic_k: str,
    topic_s: str,
    size: int,
    producers: int,
    config: dict[str, Any],
    rss: bool = False,
) -> tuple[list[Sample], list[Sample]]:
    ks: list[Sample] = []
    ss: list[Sample] = []
    for i in range(ctx.settings.runs):
        order = [(ctx.kafkad, topic_k, ks), (ctx.baseline, topic_s, ss)]
        for target, topic, out in order if i % 2 == 0 else order[::-1]:
            out.append(_produce_once(ctx, target, topic, size, producers, config, rss))
    return ks, ss


def _rows(
    ctx: Context,
    section: str,
    label: str,
    ks: list[Sample],
    ss: list[Sample],
    goals: dict[str, tuple[Goal, bool]],
) -> None:
    for metric, unit in (("records_per_s", "rec/s"), ("mb_per_s", "MB/s"), ("cpu_per_gib", "cpu-s/GiB")):
        k = figure(f"{label} {metric}", unit, [getattr(s, metric) for s in ks])
        b = figure(f"sink {label} {metric}", unit, [getattr(s, metric) for s in ss])
        goal, on_ratio = goals.get(metric, (None, False))
        ctx.rows.append(Row(section, f"{label} {unit}", k, b, "sink", ratio("", k, b), goal, on_ratio))


def produce_matrix(ctx: Context) -> None:
    """Measurement 1: record size x acks x producers x linger."""
    curve: dict[str, Any] = {}
    create_topic(ctx.kafkad.bootstrap, "bench", 1)
    for size in (100, 1024):
        for acks in ("1", "all"):
            for producers in (1, 4):
                for linger_name, config in (
                    ("default", {}),
                    ("linger5", {"linger.ms": 5}),
                    ("raw 16KiB batches", {"raw_batch_bytes": 16384}),
                ):
                    label = f"{size}B acks={'-1' if acks == 'all' else acks} x{producers} {linger_name}"
                    log.info("produce %s", label)
                    ks, ss = _pairs(ctx, "bench", "bench", size, producers, {"acks": acks, **config})
                    goals: dict[str, tuple[Goal, bool]] = {}
                    if size == 100 and acks == "1":
                        goals = {
                            "records_per_s": (Goal(">=", 1e6), False),
                            "cpu_per_gib": (Goal("<=", 1.25), True),
                        }
                    _rows(ctx, "produce", label, ks, ss, goals)
                    curve[label] = {
                        "size": size,
                        "kafkad_mb_s": statistics.median(s.mb_per_s for s in ks),
                        "sink_mb_s": statistics.median(s.mb_per_s for s in ss),
                        "kafkad_rec_s": statistics.median(s.records_per_s for s in ks),
                        "sink_rec_s": statistics.median(s.records_per_s for s in ss),
                    }
    ctx.series["produce"] = curve


def partitions(ctx: Context) -> None:
    """Measurement 5 (and 6's "with 1,000 partitions"): throughput against partition count."""
    curve: dict[str, Any] = {}
    for count in ctx.settings.partition_counts:
        topic = f"parts_p{count}"
        create_topic(ctx.kafkad.bootstrap, topic, count)
        if count == 1000:
            _memory_with_partitions(ctx)
        label = f"{count} partitions 100B acks=1 x4 linger5"
        log.info("produce %s", label)
        ks, ss = _pairs(ctx, topic, topic, 100, 4, {"acks": "1", "linger.ms": 5}, rss=count == 1000)
        _rows(ctx, "partitions", label, ks, ss, {})
        curve[str(count)] = {
            "kafkad_rec_s": statistics.median(s.records_per_s for s in ks),
            "sink_rec_s": statistics.median(s.records_per_s for s in ss),
        }
        if count == 1000:
            k = figure("rss under load", "MB", [s.peak_rss / 1e6 for s in ks])
            b = figure("sink rss under load", "MB", [s.peak_rss / 1e6 for s in ss])
            ctx.rows.append(
                Row(
                    "memory",
                    "RSS peak, 1000 partitions under load",
                    k,
                    b,
                    "sink",
                    ratio("", k, b),
                    Goal("<=", 120),
                )
            )
    ctx.series["partitions"] = curve


def _memory_with_partitions(ctx: Context) -> None:
    k = [ctx.kafkad.rss_bytes() / 1e6 for _ in range(ctx.settings.runs)]
    b = [ctx.baseline.rss_bytes() / 1e6 for _ in range(ctx.settings.runs)]
    kf, bf = figure("rss 1000 partitions", "MB", k), figure("sink rss", "MB", b)
    ctx.rows.append(Row("memory", "RSS idle with 1000 partitions", kf, bf, "sink", ratio("", kf, bf)))


def small_requests(ctx: Context) -> None:
    """Measurement 2: one record per Produce, 64 connections, one request in flight each."""
    conns = 64
    create_topic(ctx.kafkad.bootstrap, "small", 1)
    stats: dict[str, list[tuple[float, float]]] = {"kafkad": [], "sink": []}
    for i in range(ctx.settings.runs):
        order = [ctx.kafkad, ctx.baseline]
        for target in order if i % 2 == 0 else order[::-1]:
            job = Job(
                "raw_small_requests",
                {
                    "port": target.port,
                    "topic": "small",
                    "connections": conns,
                    "duration_s": ctx.settings.small_s,
                    "record_size": 100,
                },
            )
            r = ctx.pool.run([job]).results[0]
            lat = sorted(r["lat_us"])
            stats[target.name].append((r["requests"] / r["s"], percentile(lat, 99) / 1000))
    k = figure("small req/s", "req/s", [a for a, _ in stats["kafkad"]])
    b = figure("sink small req/s", "req/s", [a for a, _ in stats["sink"]])
    ctx.rows.append(
        Row(
            "small requests",
            f"1 rec/Produce, {conns} conns req/s",
            k,
            b,
            "sink",
            ratio("", k, b),
            Goal(">=", 25000),
        )
    )
    share = ratio("", k, b)
    ctx.rows.append(Row("small requests", "req/s share of sink", share, None, "", None, Goal(">=", 0.6)))
    kp = figure("small p99", "ms", [p for _, p in stats["kafkad"]])
    bp = figure("sink small p99", "ms", [p for _, p in stats["sink"]])
    ctx.rows.append(
        Row("small requests", f"1 rec/Produce, {conns} conns p99 ms", kp, bp, "sink", ratio("", kp, bp))
    )
