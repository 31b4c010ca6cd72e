"""Cluster failover scenario (issue 10's speed figures): a real ZooKeeper and three kafkad in cluster mode.

1. Idle RSS of the cluster-mode brokers (controller and not; kazoo and its threads included) against a
   standalone kafkad started in the same run.
2. Leader failover: topics whose every partition prefers one broker (10 partitions led by broker A, 1,000 led
   by broker B, neither the controller). Per run: kill -9 (then SIGTERM, Kafka's controlled shutdown) of the
   leader; `cluster_env.probe_writable` times each partition until an acks=all Produce to the leader that
   Metadata names is acknowledged; the figure is the time until ALL of them are writable. Baselines of the same run: for
   kill -9 the moment ZooKeeper expires the dead broker's session (no failover can start earlier), for
   SIGTERM the moment the process exits (leadership should have moved before). The controller's own work
   is read from its log ("controller event BrokerChange|ControlledShutdown took X ms"), 1,000 partitions
   against 10, with the ZooKeeper requests (mntr's zk_packets_received) and the controller's CPU seconds from
   the kill -9 to that event's end, which say where that work goes. Between runs the broker is restarted,
   rejoins every ISR and gets its leadership back by a preferred election over the wire.
3. Controller failover: kill -9 of the controller until a new /controller, and until a CreateTopics sent
   to a surviving broker succeeds; baseline: the dead controller's session expiry.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass

import psutil

from tests.bench.cluster_env import (
    SESSION_TIMEOUT_MS,
    ZkGoneWatch,
    cluster_env,
    create_topic,
    elect_preferred,
    probe_writable,
    states,
    wait_led_by,
    zk_packets_received,
)
from tests.bench.context import Context, Mode
from tests.bench.servers import BROKER_DEFAULTS
from tests.bench.stats import Row, figure, ratio
from tests.bench.stats import Target as Goal
from tests.cluster.cluster import KafkadCluster, wait_until
from tests.cluster.test_election import create_topic as create_topic_rf
from tests.integration.broker_process import BrokerProcess

log = logging.getLogger(__name__)
SECTION = "cluster failover"


@dataclass(frozen=True, slots=True)
class FailoverSettings:
    small_runs: int  # runs with 10 partitions (each: one kill -9 and one SIGTERM)
    large_runs: int  # runs with `large` partitions
    large: int
    controller_runs: int


FAILOVER = {
    Mode.QUICK: FailoverSettings(3, 2, 1000, 2),
    Mode.FULL: FailoverSettings(5, 5, 1000, 5),
}
_TOOK = re.compile(r"controller event (\w+) took ([0-9.]+) ms")


def failover(ctx: Context) -> None:
    s = FAILOVER[ctx.mode]
    with cluster_env(ctx.work / "failover") as c:
        _idle_rss(ctx, c)
        ctrl = c.wait_controller()
        a, b = (x for x in c.ids if x != ctrl)
        rest = {v: [x for x in c.ids if x != v] for v in (a, b)}
        work: dict[int, dict[str, list[float]]] = {}
        for topic, n, victim, runs in (
            ("fo10", 10, a, s.small_runs),
            (f"fo{s.large}", s.large, b, s.large_runs),
        ):
            create_topic(c, topic, [[victim, *rest[victim]]] * n)
            wait_led_by(c, topic, n, victim, 3, 180)
            work[n] = _leader_runs(ctx, c, topic, n, victim, runs)
        small, large = work[10], work[s.large]
        for what, event, goal in (
            ("kill -9", "BrokerChange", Goal("<=", 1000)),
            ("SIGTERM", "ControlledShutdown", None),
        ):
            k = figure(f"{event} {s.large}", "ms", large[event])
            base = figure(f"{event} 10", "ms", small[event][: len(large[event])])
            ctx.rows.append(
                Row(
                    SECTION,
                    f"controller work after {what} of a leader: {event} event for {s.large} partitions, ms",
                    k,
                    base,
                    "same event, 10 partitions",
                    ratio("", k, base),
                    goal,
                )
            )
        for key, label, unit in (
            ("zk_ops", "ZooKeeper requests (all clients) from the kill -9 to the end of BrokerChange", "req"),
            ("ctrl_cpu", "controller CPU from the kill -9 to the end of BrokerChange, s", "cpu-s"),
        ):
            k = figure(f"{key} {s.large}", unit, large[key])
            base = figure(f"{key} 10", unit, small[key][: len(large[key])])
            ctx.rows.append(
                Row(SECTION, f"{label}, {s.large} partitions", k, base, "10 partitions", ratio("", k, base))
            )
        _controller_failover(ctx, c, s.controller_runs)


def _idle_rss(ctx: Context, c: KafkadCluster) -> None:
    standalone = BrokerProcess(
        ctx.work / "failover" / "standalone", dict(BROKER_DEFAULTS), startup_timeout_s=120
    )
    standalone.start()
    try:
        ctrl = c.wait_controller()
        other = next(x for x in c.ids if x != ctrl)
        samples: dict[str, list[float]] = {"ctrl": [], "other": [], "standalone": []}
        for _ in range(ctx.settings.runs):
            samples["ctrl"].append(_rss_mb(c.broker(ctrl)))
            samples["other"].append(_rss_mb(c.broker(other)))
            samples["standalone"].append(_rss_mb(standalone))
            time.sleep(0.2)
    finally:
        standalone.stop()
    base = figure("standalone rss idle", "MB", samples["standalone"])
    for key, label in (("ctrl", "the controller"), ("other", "a broker, not controller")):
        k = figure(f"cluster rss idle {key}", "MB", samples[key])
        ctx.rows.append(
            Row(
                "memory",
                f"RSS idle, cluster mode ({label}, kazoo included)",
                k,
                base,
                "standalone kafkad",
                ratio("", k, base),
                Goal("<=", 60),
            )
        )


def _rss_mb(b: BrokerProcess) -> float:
    return float(psutil.Process(b.pid).memory_info().rss) / 1e6


def _controller_ms(c: KafkadCluster, ctrl: int, offset: int, event: str) -> float:
    def took() -> float | None:
        for m in _TOOK.finditer(c.broker(ctrl).log_text(since_start=False)[offset:]):
            if m.group(1) == event:
                return float(m.group(2))
        return None

    return c.wait_until(took, 60, f"the controller's '{event} took' log line")


def _restore(c: KafkadCluster, topic: str, n: int, victim: int) -> None:
    """Start the victim again, wait until it is back in every ISR, give it its leadership back."""
    c.broker(victim).start()
    c.wait_registered([victim], timeout_s=60)
    c.wait_until(
        lambda: all(st is not None and victim in st[1] for st in states(c, topic, n)),
        180,
        f"broker {victim} back in the ISR of {topic}",
    )
    elect_preferred(c, topic, n)
    wait_led_by(c, topic, n, victim, 3, 120)


def _leader_runs(
    ctx: Context, c: KafkadCluster, topic: str, n: int, victim: int, runs: int
) -> dict[str, list[float]]:
    got: dict[str, list[float]] = {
        k: []
        for k in (
            "kill",
            "expiry",
            "term",
            "exit",
            "BrokerChange",
            "ControlledShutdown",
            "zk_ops",
            "ctrl_cpu",
        )
    }
    for i in range(runs):
        for how in ("kill", "term"):
            ctrl = c.wait_controller(exclude=[victim])
            offset = len(c.broker(ctrl).log_text(since_start=False))
            gone = ZkGoneWatch(c, victim)
            exit_at: list[float] = []
            ctrl_proc = psutil.Process(c.broker(ctrl).pid)
            zk0, cpu0 = zk_packets_received(c), sum(ctrl_proc.cpu_times()[:2])
            t0 = time.monotonic()
            if how == "kill":
                c.kill9(victim)
            else:
                stopper = threading.Thread(target=_sigterm, args=(c, victim, exit_at))
                stopper.start()
            done = probe_writable(c, victim, topic, range(n), t0)
            all_writable = max(done.values())
            if how == "kill":
                got["kill"].append(all_writable)
                got["expiry"].append(gone.wait(60) - t0)
                got["BrokerChange"].append(_controller_ms(c, ctrl, offset, "BrokerChange"))
                got["zk_ops"].append(zk_packets_received(c) - zk0)
                got["ctrl_cpu"].append(sum(ctrl_proc.cpu_times()[:2]) - cpu0)
            else:
                stopper.join(150)
                assert exit_at, f"broker {victim} did not exit after SIGTERM"
                got["term"].append(all_writable)
                got["exit"].append(exit_at[0] - t0)
                got["ControlledShutdown"].append(_controller_ms(c, ctrl, offset, "ControlledShutdown"))
            log.info(
                "%s run %d %s: all %d partitions writable after %.3f s (first %.3f s)",
                topic,
                i,
                how,
                n,
                all_writable,
                min(done.values()),
            )
            _restore(c, topic, n, victim)
    for how, base, base_name in (
        ("kill", "expiry", "ZooKeeper session expiry"),
        ("term", "exit", "process exit"),
    ):
        k = figure(f"{how} {n}", "s", got[how])
        b = figure(f"{base} {n}", "s", got[base])
        what = "kill -9" if how == "kill" else "SIGTERM (controlled shutdown)"
        ctx.rows.append(
            Row(
                SECTION,
                f"{what} of the leader of {n} partitions: all writable again (acks=all acknowledged), s",
                k,
                b,
                base_name,
                ratio("", k, b),
            )
        )
    ctx.series[f"failover_{n}"] = got
    return got


def _sigterm(c: KafkadCluster, victim: int, exit_at: list[float]) -> None:
    c.sigterm(victim, timeout_s=120)
    exit_at.append(time.monotonic())


def _controller_failover(ctx: Context, c: KafkadCluster, runs: int) -> None:
    new_s, create_s, expiry_s = [], [], []
    for i in range(runs):
        ctrl = c.wait_controller()
        gone = ZkGoneWatch(c, ctrl)
        t0 = time.monotonic()
        c.kill9(ctrl)

        def new_controller(ctrl: int = ctrl) -> int | None:
            x = c.controller_id()
            return x if x is not None and x != ctrl else None

        new = wait_until(new_controller, 60, "a new /controller", interval_s=0.01)
        new_s.append(time.monotonic() - t0)
        survivor = c.broker(next(x for x in c.ids if x != ctrl)).bootstrap

        def created(survivor: str = survivor, name: str = f"ctl-{i}") -> bool:
            return bool(create_topic_rf(survivor, name, 1, 2)["error_code"] == 0)

        wait_until(created, 60, "a successful CreateTopics after the controller's kill -9", interval_s=0.01)
        create_s.append(time.monotonic() - t0)
        expiry_s.append(gone.wait(60) - t0)
        log.info(
            "controller %d killed: %d took over after %.3f s, CreateTopics ok after %.3f s",
            ctrl,
            new,
            new_s[-1],
            create_s[-1],
        )
        c.broker(ctrl).start()
        c.wait_registered([ctrl], timeout_s=60)
    base = figure("controller session expiry", "s", expiry_s)
    for label, xs in (("a new /controller", new_s), ("a successful CreateTopics (RF 2)", create_s)):
        k = figure(label, "s", xs)
        ctx.rows.append(
            Row(
                SECTION,
                f"kill -9 of the controller until {label}, s",
                k,
                base,
                "ZooKeeper session expiry",
                ratio("", k, base),
            )
        )
    ctx.series["controller_failover"] = {
        "new_controller_s": new_s,
        "create_topics_s": create_s,
        "expiry_s": expiry_s,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
    }
