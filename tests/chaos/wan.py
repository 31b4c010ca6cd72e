"""A flaky WAN link nemesis: a random share of packets dropped between appliances, or between an appliance and
ZooKeeper (edge sites sit behind lossy links).

The loss is nftables' `numgen random mod 100 < N drop`, in a table of its own (`inet chaos_wan`, beside
netns.py's `inet chaos` partitions) in the broker namespaces of a ChaosNet:
- `wan-lossN-brokers`: every broker drops N % of the packets it sends to the other brokers (output chain
  only, so each packet crosses one rule: N % loss each way on every broker-to-broker link); ZooKeeper and
  the clients are not touched;
- `wan-lossN-zk`: the controller's link to ZooKeeper, N % each way (its output to, and its input from,
  ZooKeeper's address): its session, watches and every ZooKeeper write of the controller cross it.
N is 5 or 30. A fault is held at least `min_hold_s` (past replica.lag.time.max.ms, so a follower that falls
behind can leave the ISR).

Figures (`figures()`, per cycle): while the link is lossy and until the cluster is whole again a sampler
reads every partition's ISR from ZooKeeper every 0.1 s: `isr_short_s` (time some partition had a short ISR),
`min_isr`, and `catch_up_s` (from the heal until every ISR is full again). `report()` adds, per nemesis, the
acks=all producers' acknowledgement latency during its faults against the no-fault time of the same run
(replication lag as a producer sees it: acks=all waits for min.insync.replicas) next to the checker's
unavailability windows; the run's no-loss/no-duplicate/no-divergence verdict is the checker's, as for every
nemesis.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tests.chaos.checker import window_stats
from tests.chaos.history import Fault, Op, Outcome
from tests.chaos.nemesis import Brokers, pick_broker

PERCENTS = (5, 30)
SCOPES = ("brokers", "zk")
NAMES = [f"wan-loss{p}-{s}" for s in SCOPES for p in PERCENTS]
TABLE = "chaos_wan"
SAMPLE_S = 0.1
CATCH_UP_GIVE_UP_S = 120.0
WARM_UP_S = 1.0  # after the first acknowledgement: the clients' first second (connecting) is no baseline
SETTLE_S = 3.0  # after a fault's heal: catch-up time (acks=all waits for it), no baseline either


class LossyNet(Protocol):
    """What WanLoss needs of tests/chaos/netns.ChaosNet."""

    hosts: list[int]

    @property
    def zk_addr(self) -> str: ...
    def addr(self, host: int) -> str: ...
    def ns(self, host: int) -> str: ...


def _nft(ns: str, script: str) -> None:
    r = subprocess.run(
        ["ip", "netns", "exec", ns, "nft", "-f", "-"],
        input=script,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if r.returncode != 0:
        raise AssertionError(f"nft in {ns} failed ({r.returncode}): {r.stderr.strip()}\n{script}")


def loss_rules(percent: int, *, out_to: Sequence[str] = (), in_from: Sequence[str] = ()) -> str:
    """An nft script (re)creating table inet chaos_wan with rules dropping `percent` % of the packets sent
    to `out_to` and received from `in_from`."""
    assert 0 < percent < 100, percent
    lines = [
        f"table inet {TABLE} {{\n chain input {{ type filter hook input priority -1; }}\n"
        f" chain output {{ type filter hook output priority -1; }}\n}}",
        f"flush table inet {TABLE}",
    ]
    drop = f"numgen random mod 100 < {percent} drop"
    if out_to:
        lines.append(f"add rule inet {TABLE} output ip daddr {{ {', '.join(out_to)} }} {drop}")
    if in_from:
        lines.append(f"add rule inet {TABLE} input ip saddr {{ {', '.join(in_from)} }} {drop}")
    return "\n".join(lines) + "\n"


class WanLoss:
    """`percent` % packet loss on the brokers' links to each other (`scope` "brokers") or on the controller's
    link to ZooKeeper ("zk"); healed by flushing the table. `isr_sizes` (partition -> ISR size, None when
    unreadable) feeds the figures; `full_isr` is the replication factor."""

    def __init__(
        self,
        net: LossyNet,
        brokers: Brokers,
        scope: str,
        percent: int,
        topic: str,
        partitions: int,
        *,
        isr_sizes: Callable[[], dict[int, int] | None],
        full_isr: int,
        min_hold_s: float,
    ) -> None:
        assert scope in SCOPES and percent in PERCENTS
        self.net = net
        self.brokers = brokers
        self.scope = scope
        self.percent = percent
        self.topic = topic
        self.partitions = partitions
        self.name = f"wan-loss{percent}-{scope}"
        self.min_hold_s = min_hold_s
        self._isr_sizes = isr_sizes
        self._full = full_isr
        self._touched: list[str] = []
        self._sampler: _IsrSampler | None = None
        self.cycles: list[dict[str, Any]] = []

    def inject(self, rng: random.Random) -> str:
        self._finish_sampler()  # a previous cycle's, if the cluster took long to become whole
        if self.scope == "brokers":
            for h in self.net.hosts:
                peers = [self.net.addr(x) for x in self.net.hosts if x != h]
                self._apply(self.net.ns(h), loss_rules(self.percent, out_to=peers))
            target = "every broker-to-broker link"
        else:
            t = pick_broker(self.brokers, "controller", self.topic, self.partitions, rng)
            zk = [self.net.zk_addr]
            self._apply(self.net.ns(t), loss_rules(self.percent, out_to=zk, in_from=zk))
            target = f"broker {t} <-> zookeeper"
        self._sampler = _IsrSampler(self._isr_sizes, self._full, target)
        return target

    def _apply(self, ns: str, script: str) -> None:
        self._touched.append(ns)
        _nft(ns, script)

    def heal(self) -> None:
        touched, self._touched = self._touched, []
        for ns in touched:
            _nft(ns, f"flush table inet {TABLE}\n")
        if self._sampler is not None:
            self._sampler.healed()

    def _finish_sampler(self) -> None:
        if self._sampler is not None:
            self.cycles.append(self._sampler.stop())
            self._sampler = None

    def figures(self) -> list[dict[str, Any]]:
        """Per cycle: target, isr_short_s, min_isr, catch_up_s (None: not whole within the give-up time)."""
        self._finish_sampler()
        return list(self.cycles)


class _IsrSampler:
    """Reads every partition's ISR size every SAMPLE_S from the inject until the ISRs are full after the heal."""

    def __init__(self, isr_sizes: Callable[[], dict[int, int] | None], full: int, target: str) -> None:
        self._read = isr_sizes
        self._full = full
        self.target = target
        self._start = time.monotonic()
        self._healed_at: float | None = None
        self._whole_at: float | None = None
        self._short_s = 0.0
        self._min = full
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wan-isr-sampler", daemon=True)
        self._thread.start()

    def healed(self) -> None:
        self._healed_at = time.monotonic()

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(SAMPLE_S):
            now = time.monotonic()
            try:
                sizes = self._read()
            except Exception:  # ZooKeeper unreadable for a moment: no sample
                sizes = None
            if sizes is not None:
                smallest = min(sizes.values(), default=self._full)
                self._min = min(self._min, smallest)
                if smallest < self._full:
                    self._short_s += now - last
                elif self._healed_at is not None:
                    self._whole_at = now
                    return
            if self._healed_at is not None and now - self._healed_at > CATCH_UP_GIVE_UP_S:
                return
            last = now

    def stop(self) -> dict[str, Any]:
        healed = self._healed_at
        if healed is not None:  # it ends by itself once the ISRs are full (or at the give-up time)
            self._thread.join(max(0.0, healed + CATCH_UP_GIVE_UP_S + 1 - time.monotonic()))
        self._stop.set()
        self._thread.join(5)
        return {
            "target": self.target,
            "held_s": round((healed or time.monotonic()) - self._start, 2),
            "isr_short_s": round(self._short_s, 2),
            "min_isr": self._min,
            "catch_up_s": None
            if healed is None or self._whole_at is None
            else round(max(0.0, self._whole_at - healed - SAMPLE_S), 2),
        }


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _latency_ms(ops: Sequence[Op], spans: Sequence[tuple[float, float]]) -> dict[str, float] | None:
    lat = sorted(
        (o.end - o.start) * 1000
        for o in ops
        if o.kind == "send" and o.outcome is Outcome.OK and any(a <= o.start < b for a, b in spans)
    )
    if not lat:
        return None
    return {
        "count": len(lat),
        "p50_ms": round(lat[len(lat) // 2], 1),
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 1),
        "max_ms": round(lat[-1], 1),
    }


def report(
    nemeses: Sequence[object], ops: Sequence[Op], faults: Sequence[Fault], windows: Sequence[Any]
) -> dict[str, Any]:
    """Per WAN nemesis of the run: its cycles' ISR figures, the acks=all latency while its link was lossy
    against the no-fault baseline (sends started WARM_UP_S after the first acknowledgement, outside every
    fault and its SETTLE_S after: mostly the warm-up before the first fault), unavailability."""
    out: dict[str, Any] = {}
    quiet: list[tuple[float, float]] = []
    edges = sorted((f.start, f.end + SETTLE_S) for f in faults)
    acked = [o.end for o in ops if o.kind == "send" and o.outcome is Outcome.OK]
    t = min(acked, default=0.0) + WARM_UP_S
    for a, b in edges:
        if a > t:
            quiet.append((t, a))
        t = max(t, b)
    quiet.append((t, float("inf")))
    baseline = _latency_ms(ops, quiet)
    for n in nemeses:
        if not isinstance(n, WanLoss):
            continue
        spans = [(f.start, f.end) for f in faults if f.name == n.name]
        cycles = n.figures()
        catch_up = [c["catch_up_s"] for c in cycles if c["catch_up_s"] is not None]
        out[n.name] = {
            "cycles": len(spans),
            "ack_latency_lossy": _latency_ms(ops, spans),
            "ack_latency_no_fault": baseline,
            "isr_short_s": _spread([c["isr_short_s"] for c in cycles]),
            "min_isr": min((c["min_isr"] for c in cycles), default=None),
            "catch_up_s": _spread(catch_up),
            "not_caught_up": sum(c["catch_up_s"] is None for c in cycles),
            "unavailability": window_stats([w for w in windows if n.name in w.faults]),
            "per_cycle": cycles,
        }
    return out


def make(
    name: str,
    net: LossyNet,
    brokers: Brokers,
    topic: str,
    partitions: int,
    *,
    isr_sizes: Callable[[], dict[int, int] | None],
    full_isr: int,
    min_hold_s: float,
) -> WanLoss:
    assert name in NAMES, name
    percent, scope = name[len("wan-loss") :].split("-", 1)
    return WanLoss(
        net, brokers, scope, int(percent), topic, partitions,
        isr_sizes=isr_sizes, full_isr=full_isr, min_hold_s=min_hold_s,
    )  # fmt: skip
