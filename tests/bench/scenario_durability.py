"""Durability scenario (issue 18 item 2): what `flush.messages=1` (fsync before the answer, storage/log_sync.py's
group commit) costs against the same run's Kafka defaults (no flush settings: the page cache only).

1. Standalone: one kafkad of its own (metrics listener on) with two 1-partition topics, `flush1`
   (flush.messages=1) and `default`; one confluent-kafka producer, acks=1, linger.ms 5, 100-byte records,
   alternating which topic goes first run by run.
2. Cluster: ZooKeeper + 3 kafkad, RF 3 topics led by one broker, the same producer with acks=all.
Beside each records/s ratio: fsyncs/s and records per fsync, from the brokers' group-commit counters
(kafkad_log_fsyncs / kafkad_log_fsync_records) read before and after each flush.messages=1 run (in the
cluster: the leader's, and the followers' mean).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from tests.bench.cluster_env import cluster_env, create_topic, wait_led_by
from tests.bench.context import Context
from tests.bench.servers import start_broker
from tests.bench.stats import Row, figure, ratio
from tests.bench.stats import Target as Goal
from tests.bench.workers import Job
from tests.integration.broker_process import free_port
from tests.integration.clients import create_topics
from tests.integration.test_storage_faults import metrics

log = logging.getLogger(__name__)
SECTION = "durability"
PRODUCER = {"linger.ms": 5}
FLUSH1 = {"flush.messages": "1"}


def _counters(port: int) -> tuple[int, int]:
    """(fsyncs, records fsynced) of one broker."""
    text = metrics(port)
    out = []
    for name in ("kafkad_log_fsyncs_total", "kafkad_log_fsync_records_total"):
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        out.append(int(float(m.group(1))) if m else 0)
    return out[0], out[1]


def _produce(ctx: Context, bootstrap: str, topic: str, acks: str) -> tuple[float, float]:
    """(records/s, seconds) of one confluent producer run."""
    job = Job(
        "produce_throughput",
        {
            "bootstrap": bootstrap,
            "topic": topic,
            "size": 100,
            "duration_s": ctx.settings.produce_s,
            "config": {"acks": acks, **PRODUCER},
        },
    )
    r = ctx.pool.run([job]).results[0]
    if r["errors"]:
        log.warning("%s acks=%s: %d delivery errors", topic, acks, r["errors"])
    return float(r["records"] / r["s"]), float(r["s"])


def _measure(
    ctx: Context, bootstrap: str, acks: str, ports: Mapping[str, list[int]]
) -> tuple[list[float], list[float], dict[str, list[tuple[float, float]]]]:
    """Alternating runs of `flush1` and `default`: their rec/s, and per broker group of `ports`
    (fsyncs/s, records per fsync) during the flush1 runs."""
    rates: dict[str, list[float]] = {"flush1": [], "default": []}
    syncs: dict[str, list[tuple[float, float]]] = {k: [] for k in ports}
    for i in range(ctx.settings.runs):
        order = ("flush1", "default") if i % 2 == 0 else ("default", "flush1")
        for topic in order:
            before = {k: [_counters(p) for p in ps] for k, ps in ports.items()}
            rate, seconds = _produce(ctx, bootstrap, topic, acks)
            rates[topic].append(rate)
            if topic != "flush1":
                continue
            for k, ps in ports.items():
                deltas = [
                    (a[0] - b[0], a[1] - b[1])
                    for a, b in zip([_counters(p) for p in ps], before[k], strict=True)
                ]
                fsyncs = sum(d[0] for d in deltas) / len(deltas)
                records = sum(d[1] for d in deltas) / len(deltas)
                syncs[k].append((fsyncs / seconds, records / fsyncs if fsyncs else 0.0))
        log.info(
            "durability acks=%s run %d: %s", acks, i, {t: f"{r[-1]:.0f} rec/s" for t, r in rates.items()}
        )
    return rates["flush1"], rates["default"], syncs


def _rows(ctx: Context, label: str, flush1: list[float], default: list[float], syncs: dict[str, Any]) -> None:
    k = figure(f"{label} flush.messages=1", "rec/s", flush1)
    b = figure(f"{label} default", "rec/s", default)
    ctx.rows.append(
        Row(
            SECTION,
            f"{label} flush.messages=1 rec/s",
            k,
            b,
            "no flush settings",
            ratio("", k, b),
            Goal(">=", 0.5),
            True,
        )
    )
    for who, runs in syncs.items():
        suffix = f" ({who})" if who else ""
        f = figure(f"{label} fsyncs/s{suffix}", "fsync/s", [r[0] for r in runs])
        ctx.rows.append(Row(SECTION, f"{label} flush.messages=1 fsyncs/s{suffix}", f))
        rp = figure(f"{label} records per fsync{suffix}", "rec/fsync", [r[1] for r in runs])
        ctx.rows.append(Row(SECTION, f"{label} flush.messages=1 records per fsync{suffix}", rp))


def durability(ctx: Context) -> None:
    _standalone(ctx)
    _cluster(ctx)


def _standalone(ctx: Context) -> None:
    port = free_port()
    broker = start_broker(ctx.work / "durability", {"metrics.listeners": f"http://127.0.0.1:{port}"})
    try:
        create_topics(broker.bootstrap, {"flush1": 1, "default": 1}, {"flush1": FLUSH1})
        flush1, default, syncs = _measure(ctx, broker.bootstrap, "1", {"": [port]})
        _rows(ctx, "standalone acks=1 100B confluent linger5", flush1, default, syncs)
    finally:
        broker.stop()


def _cluster(ctx: Context) -> None:
    ports = {b: free_port() for b in (1, 2, 3)}
    overrides = {"min.insync.replicas": "2", "replica.fetch.wait.max.ms": "500"}
    metrics_on = {b: {"metrics.listeners": f"http://127.0.0.1:{p}"} for b, p in ports.items()}
    with cluster_env(ctx.work / "durability-cluster", overrides, broker_overrides=metrics_on) as c:
        leader = c.wait_controller()
        followers = [x for x in c.ids if x != leader]
        create_topic(c, "flush1", [[leader, *followers]], FLUSH1)
        create_topic(c, "default", [[leader, *followers]])
        for t in ("flush1", "default"):
            wait_led_by(c, t, 1, leader, 3, 60)
        groups = {"leader": [ports[leader]], "followers": [ports[f] for f in followers]}
        flush1, default, syncs = _measure(ctx, c.bootstrap, "all", groups)
        _rows(ctx, "RF 3 acks=all 100B confluent linger5", flush1, default, syncs)
