"""Power loss: the nemesis that cuts an appliance's (or the whole rack's) power, and what to measure after.

Every broker's log dir lives on its own LazyFS mount (lazyfs.py). A power loss kills every process of the
lost appliances with kill -9 (the broker is the only one that touches the disk), drops what their file
systems never made durable (LazyFS `crash`), and remounts them; heal is the power coming back: the
brokers start again on whatever survived. Two kinds (Jepsen's independent vs correlated failures):
`power-loss-one` (one appliance, picked at random) and `power-loss-rack` (every appliance at once: the rack's
shared feed). ZooKeeper runs off the rack's disks: it keeps its fsync'd data and is not killed.

Figures beside the checker's (checker.py):
- `replica_divergence`: the batches of every replica of a partition, compared on disk at the end of a run,
  offset by offset (base offset, last offset, CRC) over the range every replica holds: replicas that came
  back from a power loss with different tails must converge through truncation (0 divergent batches);
- `recovery_times`: per power loss, from the power coming back (heal start) to an acknowledged write on
  every partition by every writer.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkad.storage.records.records import is_crc_valid, iter_headers
from tests.chaos.checker import window_stats
from tests.chaos.history import Op, Outcome
from tests.chaos.lazyfs import LazyMount, summary
from tests.chaos.nemesis import Brokers

KINDS = ("one", "rack")


class PowerLoss:
    """kill -9 + LazyFS power loss + remount of one appliance (`kind="one"`) or all (`"rack"`); heal starts
    their brokers again."""

    def __init__(self, brokers: Brokers, mounts: Mapping[int, LazyMount], kind: str) -> None:
        assert kind in KINDS
        self.brokers = brokers
        self.mounts = mounts
        self.kind = kind
        self.name = f"power-loss-{kind}"
        self.min_hold_s = 0.0
        self.targets: list[int] = []
        self.power_on: list[float] = []  # time.monotonic() when each heal began (the power came back)
        self.dropped: list[dict[str, int]] = []  # what each appliance's file system lost, per power loss

    def inject(self, rng: random.Random) -> str:
        ids = list(self.brokers.ids)
        self.targets = [rng.choice(ids)] if self.kind == "one" else ids
        for t in self.targets:  # every process at once: the feed drops for all of them together
            self.brokers.kill9(t)
        for t in self.targets:
            self.dropped.append(summary(self.mounts[t].power_loss()))
            self.mounts[t].remount()
        return (
            f"broker {self.targets[0]}" if self.kind == "one" else "rack " + ",".join(map(str, self.targets))
        )

    def heal(self) -> None:
        targets, self.targets = self.targets, []
        assert targets, "heal without inject"
        self.power_on.append(time.monotonic())
        for t in targets:
            self.brokers.restart(t)


def _batches(partition_dir: Path) -> dict[int, tuple[int, int]]:
    """base offset -> (last offset, crc) of every complete, CRC-valid batch of one replica."""
    out: dict[int, tuple[int, int]] = {}
    for seg in sorted(partition_dir.glob("*.log")):
        try:
            data = seg.read_bytes()
        except FileNotFoundError:  # deleted by retention meanwhile
            continue
        for h in iter_headers(data):
            if not is_crc_valid(data, h):
                break
            out[h.base_offset] = (h.base_offset + h.last_offset_delta, h.crc)
    return out


def replica_divergence(data_dirs: Mapping[int, Path], topic: str, partitions: int) -> list[dict[str, Any]]:
    """Batches two replicas of a partition hold differently at one offset, over the offsets all hold."""
    found: list[dict[str, Any]] = []
    for p in range(partitions):
        reps = {
            b: _batches(d / f"{topic}-{p}") for b, d in data_dirs.items() if (d / f"{topic}-{p}").is_dir()
        }
        if len(reps) < 2:
            continue
        common = min((max(v[0] for v in r.values()) if r else -1) for r in reps.values())
        bases = sorted({base for r in reps.values() for base, (last, _) in r.items() if last <= common})
        for base in bases:
            seen = {b: r.get(base) for b, r in reps.items()}
            if len(set(seen.values())) > 1:
                found.append({"partition": p, "base_offset": base, "replicas": seen})
    return found


def recovery_times(
    ops: Sequence[Op], power_on: Iterable[float], partitions: int, writers: int
) -> list[float]:
    """Per power-on time (history seconds): seconds until every writer had an ack on every partition."""
    acks: dict[tuple[str, int], list[float]] = defaultdict(list)
    for o in ops:
        if o.kind == "send" and o.outcome is Outcome.OK:
            acks[(o.client, o.partition)].append(o.end)
    for v in acks.values():
        v.sort()
    out = []
    for t in power_on:
        firsts = []
        for key in list(acks):
            later = [a for a in acks[key] if a > t]
            if later:
                firsts.append(later[0])
        if len(firsts) == partitions * writers:
            out.append(max(firsts) - t)
    return out


def figures(
    report_summary: Mapping[str, Any],
    per_nemesis: Mapping[str, Mapping[str, Any]],
    nemesis: PowerLoss,
    recoveries: Sequence[float],
    divergent_replicas: int,
) -> dict[str, Any]:
    """One row of docs/chaos.md's power-loss table."""
    mine = per_nemesis.get(nemesis.name, {})
    rec = sorted(recoveries)
    u = mine.get("unavailability", window_stats([]))
    return {
        "nemesis": nemesis.name,
        "cycles": mine.get("cycles", 0),
        "acked": report_summary.get("acked", 0),
        "lost": report_summary.get("lost", 0),
        "duplicated": report_summary.get("duplicate", 0),
        "divergent_reads": report_summary.get("divergent", 0),
        "divergent_replicas": divergent_replicas,
        "corrupt": report_summary.get("corrupt", 0),
        "unavailable_p50_s": round(u["p50_s"], 2),
        "unavailable_p99_s": round(u["p99_s"], 2),
        "unavailable_max_s": round(u["max_s"], 2),
        "recovery_p50_s": round(rec[len(rec) // 2], 2) if rec else None,
        "recovery_max_s": round(rec[-1], 2) if rec else None,
        "bytes_dropped": sum(d["bytes_dropped"] for d in nemesis.dropped),
    }


def to_history_time(monotonic_times: Iterable[float], t0: float) -> list[float]:
    return [t - t0 for t in monotonic_times]


def lazyfs_dirs(base: Path, bid: int) -> tuple[Path, Path]:
    """(backing dir, mount point) of broker `bid`'s appliance under a test's base dir."""
    return base / f"fs{bid}" / "backing", base / f"mnt{bid}"
