"""Checks a recorded History (history.py) the way Jepsen's Kafka workload does, and reports offenders.

Anomaly classes (each is a list of findings naming the records; an empty list = none found):
- lost: an acknowledged send whose value no read ever returned, or (`read_before`: true) that earlier
  reads returned but the final read (client `final`, every partition from the beginning to its end, when
  the history has one) no longer holds: a log truncated below it after it was read (`covered` says whether
  some read of that partition went past the acknowledged offset; the runner's final drain reads every partition to its end
  after writing a marker, so an uncovered loss is a log that was truncated below an acknowledged offset);
- duplicate: one value at more than one (partition, offset), among reads and acknowledgements;
- divergent: one (partition, offset) holding different values for different readers (or for a reader and
  the producer's acknowledgement);
- nonmonotonic: a reader got an offset <= the one it got before in that partition, with no assignment change
  between them (a group rebalance or a new assign() restarts the order);
- skipped: a reader jumped over offsets that exist (some other read or acknowledgement saw a record there);
- failed_read: a send reported as definitely failed whose value was read (the client was told a lie);
- corrupt: a record served whose value no writer ever sent (zeros or bytes of a torn write after a power
  loss, another record's bytes: what a log recovered from a damaged tail must never serve).
Unavailability windows are measured, not judged: per partition, every stretch longer than `threshold_s`
between two acknowledgements (or from the first attempt to the first ack / from the last ack to the last
attempt) while sends were being attempted, blamed on the latest fault that began before it ended.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tests.chaos.history import Fault, Op, Outcome

ANOMALY_CLASSES = ("lost", "duplicate", "divergent", "nonmonotonic", "skipped", "failed_read", "corrupt")


class Window(NamedTuple):
    partition: int
    start: float
    end: float
    faults: tuple[str, ...]

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass
class Report:
    anomalies: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {k: [] for k in ANOMALY_CLASSES}
    )
    windows: list[Window] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.values())

    def found(self) -> list[str]:
        return [k for k in ANOMALY_CLASSES if self.anomalies[k]]

    def summary(self) -> dict[str, Any]:
        return {
            **self.counts,
            **{k: len(v) for k, v in self.anomalies.items()},
            "unavailable_windows": len(self.windows),
            "valid": self.valid,
        }

    def explain(self, limit: int = 10) -> str:
        lines = [f"history summary: {self.summary()}"]
        for k in self.found():
            lines.append(f"{k}: {len(self.anomalies[k])}")
            lines += [f"  {x}" for x in self.anomalies[k][:limit]]
        return "\n".join(lines)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def window_stats(windows: Iterable[Window]) -> dict[str, float]:
    d = sorted(w.duration for w in windows)
    return {
        "count": len(d),
        "p50_s": _percentile(d, 0.5),
        "p99_s": _percentile(d, 0.99),
        "max_s": d[-1] if d else 0.0,
    }


def check(ops: Iterable[Op], faults: Sequence[Fault] = (), *, threshold_s: float = 1.0) -> Report:
    ops = sorted(ops, key=lambda o: (o.start, o.end))
    r = Report()
    sends = [o for o in ops if o.kind == "send"]
    acked = {o.value: o for o in sends if o.outcome is Outcome.OK}
    failed = {o.value: o for o in sends if o.outcome is Outcome.FAILED}
    # who saw what where: (partition, offset) -> value -> sources; value -> positions
    at: dict[tuple[int, int], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    positions: dict[str, set[tuple[int, int]]] = defaultdict(set)
    read_values: set[str] = set()
    final_values: set[str] = set()
    has_final = False
    max_read: dict[int, int] = defaultdict(lambda: -1)
    for o in acked.values():
        if o.offset < 0:  # acknowledged without an offset: only its value can be checked (lost)
            continue
        at[(o.partition, o.offset)][o.value].append(f"ack:{o.client}@{o.end:.3f}")
        positions[o.value].add((o.partition, o.offset))
    sent = {o.value for o in sends}
    n_read = 0
    for o in ops:
        if o.kind != "poll":
            continue
        for rec in o.records:
            n_read += 1
            if rec.value not in sent:
                r.anomalies["corrupt"].append(
                    {"partition": rec.partition, "offset": rec.offset, "value": rec.value[:80],
                     "read": f"{o.client}@{o.end:.3f}"}
                )  # fmt: skip
                continue
            srcs = at[(rec.partition, rec.offset)][rec.value]
            if len(srcs) < 4:  # a few witnesses are enough to name in a report
                srcs.append(f"read:{o.client}@{o.end:.3f}")
            positions[rec.value].add((rec.partition, rec.offset))
            read_values.add(rec.value)
            if o.client == "final":
                final_values.add(rec.value)
                has_final = True
            max_read[rec.partition] = max(max_read[rec.partition], rec.offset)
    known: dict[int, list[int]] = defaultdict(list)
    for p, off in at:
        known[p].append(off)
    for p in known:
        known[p].sort()

    for v, o in acked.items():
        if v not in read_values or (has_final and v not in final_values):
            r.anomalies["lost"].append(
                {
                    "value": v,
                    "partition": o.partition,
                    "offset": o.offset,
                    "acked_at": round(o.end, 3),
                    "covered": max_read[o.partition] >= o.offset,
                    "read_before": v in read_values,
                }
            )
    for v, pos in positions.items():
        if len(pos) > 1:
            r.anomalies["duplicate"].append({"value": v, "positions": sorted(pos)})
    for (p, off), vals in sorted(at.items()):
        if len(vals) > 1:
            r.anomalies["divergent"].append(
                {"partition": p, "offset": off, "values": {v: list(s) for v, s in vals.items()}}
            )
    for v, o in failed.items():
        if v in read_values:
            r.anomalies["failed_read"].append({"value": v, "partition": o.partition, "error": o.error})
    _check_order(ops, known, r)
    r.windows = _windows(sends, faults, threshold_s)
    r.counts = {
        "sends": len(sends),
        "acked": len(acked),
        "failed": len(failed),
        "unknown": sum(1 for o in sends if o.outcome is Outcome.UNKNOWN),
        "polls": sum(1 for o in ops if o.kind == "poll"),
        "records_read": n_read,
    }
    return r


def _check_order(ops: Sequence[Op], known: dict[int, list[int]], r: Report) -> None:
    last: dict[tuple[str, int], tuple[int, float]] = {}
    for o in ops:
        if o.kind == "assign":
            for key in [k for k in last if k[0] == o.client]:
                del last[key]
            continue
        if o.kind != "poll":
            continue
        for rec in o.records:
            key = (o.client, rec.partition)
            prev = last.get(key)
            last[key] = (rec.offset, o.end)
            if prev is None:
                continue
            prev_off, _ = prev
            if rec.offset <= prev_off:
                r.anomalies["nonmonotonic"].append(
                    {
                        "client": o.client,
                        "partition": rec.partition,
                        "previous": prev_off,
                        "offset": rec.offset,
                        "at": round(o.end, 3),
                    }
                )
            elif rec.offset > prev_off + 1:
                ks = known[rec.partition]
                lo = bisect.bisect_right(ks, prev_off)
                hi = bisect.bisect_left(ks, rec.offset)
                if hi > lo:
                    r.anomalies["skipped"].append(
                        {
                            "client": o.client,
                            "partition": rec.partition,
                            "from": prev_off,
                            "to": rec.offset,
                            "skipped": ks[lo:hi][:20],
                            "at": round(o.end, 3),
                        }
                    )


def _windows(sends: Sequence[Op], faults: Sequence[Fault], threshold_s: float) -> list[Window]:
    by_p: dict[int, list[Op]] = defaultdict(list)
    for o in sends:
        by_p[o.partition].append(o)
    out: list[Window] = []
    for p, ss in sorted(by_p.items()):
        starts = sorted(o.start for o in ss)
        acks = sorted(o.end for o in ss if o.outcome is Outcome.OK)
        last_attempt = max(o.end for o in ss)
        edges = [starts[0], *acks]
        gaps = list(itertools.pairwise(edges))
        if acks and last_attempt > acks[-1]:
            gaps.append((acks[-1], last_attempt))
        if not acks:
            gaps = [(starts[0], last_attempt)]
        for a, b in gaps:
            i = bisect.bisect_left(starts, a)
            if i >= len(starts) or starts[i] >= b:
                continue  # nobody tried to write in the gap: idle, not unavailable
            a = starts[i]  # unavailable from the first attempt that found no ack
            if b - a <= threshold_s:
                continue
            # blamed: the latest fault that began before the window ended and was still held (or had just
            # been healed: kill -9 is instant) when it began
            near = [f for f in faults if f.start < b and f.end >= a - threshold_s]
            names = (max(near, key=lambda f: f.start).name,) if near else ()
            out.append(Window(p, a, b, names))
    return out
