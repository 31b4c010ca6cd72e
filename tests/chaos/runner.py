"""A randomised chaos schedule over a running workload, then the checker, a JSON report and an SVG plot.

The schedule (which nemesis, how long the fault is held, how long the quiet time after healing) is drawn
up front from one seed, printed at the start (`chaos seed N`) and stored in the report; the same seed
replays the same schedule (targets that depend on who leads can still differ). After each heal the run
waits, bounded, until every partition has acknowledged a write again; a partition that does not recover
is recorded (`unrecovered`) and makes the run invalid.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos.checker import Report, check, window_stats
from tests.chaos.history import Fault, History
from tests.chaos.nemesis import Nemesis
from tests.chaos.plot import availability_svg
from tests.chaos.workload import Workload

log = logging.getLogger(__name__)


class Step:
    def __init__(self, nemesis: int, hold_s: float, quiet_s: float) -> None:
        self.nemesis = nemesis
        self.hold_s = hold_s
        self.quiet_s = quiet_s


def schedule(
    seed: int, n_nemeses: int, cycles: int, hold: tuple[float, float], quiet: tuple[float, float]
) -> list[Step]:
    """`cycles` steps; every nemesis comes once before any comes twice (so short runs cover them all)."""
    rng = random.Random(seed)
    order: list[int] = []
    while len(order) < cycles:
        batch = list(range(n_nemeses))
        rng.shuffle(batch)
        order += batch
    return [Step(i, rng.uniform(*hold), rng.uniform(*quiet)) for i in order[:cycles]]


@dataclass
class ChaosResult:
    seed: int
    report: Report
    history: History
    per_nemesis: dict[str, dict[str, Any]]
    unrecovered: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    json_path: Path | None = None
    svg_path: Path | None = None

    @property
    def valid(self) -> bool:
        return self.report.valid and not self.unrecovered and not self.errors

    def explain(self) -> str:
        return (
            f"chaos seed {self.seed}\n{self.report.explain()}\nunrecovered: {self.unrecovered}\n"
            f"errors: {self.errors}\nper nemesis: {json.dumps(self.per_nemesis, indent=1)}"
        )


def run_chaos(
    workload: Workload,
    nemeses: Sequence[Nemesis],
    *,
    cycles: int,
    seed: int,
    out_dir: Path,
    hold: tuple[float, float] = (1.0, 3.0),
    quiet: tuple[float, float] = (1.0, 2.0),
    recover_timeout_s: float = 60.0,
    threshold_s: float = 1.0,
    warmup_s: float = 2.0,
    healthy: Callable[[], bool] = lambda: True,
    describe: Callable[[], str] = lambda: "",
) -> ChaosResult:
    print(f"chaos seed {seed} ({cycles} cycles of {[n.name for n in nemeses]})", flush=True)
    h = workload.h
    out_dir.mkdir(parents=True, exist_ok=True)
    unrecovered: list[dict[str, Any]] = []
    errors: list[str] = []
    steps = schedule(seed, len(nemeses), cycles, hold, quiet)
    rng = random.Random(seed ^ 0x5EED)
    workload.start()
    try:
        _wait_acks(workload, 0.0, recover_timeout_s, "warm-up", unrecovered)
        time.sleep(warmup_s)  # steady traffic before the first fault (schedule spacing, not a sync)
        for i, step in enumerate(steps):
            nem = nemeses[step.nemesis]
            t0 = h.now()
            injected = False
            try:
                target = nem.inject(rng)
                injected = True
            except Exception as e:  # no target to hit, a broker that did not start: a finding, not a crash
                errors.append(f"cycle {i} {nem.name}: inject failed: {e!r}"[-3000:])
                target = "(inject failed)"
            # the fault's duration: the experiment itself
            time.sleep(max(step.hold_s, float(getattr(nem, "min_hold_s", 0.0))))
            try:
                if injected:
                    nem.heal()
            except Exception as e:
                errors.append(f"cycle {i} {nem.name}: heal failed: {e!r}"[-3000:])
            t1 = h.now()
            h.add_fault(Fault(nem.name, target, t0, t1))
            log.info("cycle %d: %s %s held %.1fs", i, nem.name, target, t1 - t0)
            deadline = time.monotonic() + recover_timeout_s
            while not healthy():
                if time.monotonic() >= deadline:
                    unrecovered.append({"after": f"cycle {i} {nem.name}", "unhealthy": describe()[-3000:]})
                    break
                time.sleep(0.1)
            _wait_acks(
                workload, t1, max(1.0, deadline - time.monotonic()), f"cycle {i} {nem.name}", unrecovered
            )
            if unrecovered or not injected:
                break  # a cluster that did not come back makes further cycles meaningless: report now
            time.sleep(step.quiet_s)  # spacing between faults
    finally:
        errors += workload.stop()
    try:
        workload.final_read(timeout_s=10.0 if unrecovered or errors else 120.0)
    except AssertionError as e:
        errors.append(f"final read: {e}"[-3000:])
    errors += [f"{w.client}: {e}" for w in workload.writers for e in w.errors]
    errors += [f"{r.client}: {e}" for r in workload.readers for e in r.errors if e.startswith("consumer:")]
    ops, faults = h.snapshot()
    report = check(ops, faults, threshold_s=threshold_s)
    result = ChaosResult(seed, report, h, per_nemesis(report, faults, ops), unrecovered, errors)
    result.json_path = out_dir / "chaos-report.json"
    result.svg_path = out_dir / "chaos-availability.svg"
    h.save(out_dir / "chaos-history.jsonl")
    result.json_path.write_text(json.dumps(report_json(result), indent=1, default=str))
    result.svg_path.write_text(availability_svg(ops, faults, report.windows, workload.partitions))
    print(f"chaos report {result.json_path}, plot {result.svg_path}, valid={result.valid}", flush=True)
    return result


def _wait_acks(
    w: Workload, since: float, timeout_s: float, what: str, unrecovered: list[dict[str, Any]]
) -> None:
    deadline = time.monotonic() + timeout_s
    want = set(range(w.partitions))
    while True:
        got = w.acked_since(since)
        if want <= got:
            return
        if time.monotonic() >= deadline:
            unrecovered.append(
                {"after": what, "partitions": sorted(want - got), "stuck_writers": w.stuck_writers(since),
                 "timeout_s": timeout_s}
            )  # fmt: skip
            return
        time.sleep(0.05)


def per_nemesis(report: Report, faults: Sequence[Fault], ops: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Figures per nemesis: cycles, acks during its cycles (fault start to next fault), lost, windows."""
    spans: list[tuple[float, float, str]] = []
    fs = sorted(faults, key=lambda f: f.start)
    for i, f in enumerate(fs):
        spans.append((f.start, fs[i + 1].start if i + 1 < len(fs) else float("inf"), f.name))

    def owner(t: float) -> str:
        for a, b, name in spans:
            if a <= t < b:
                return name
        return "(no fault)"

    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"cycles": 0, "acked": 0, "lost": 0})
    for f in fs:
        out[f.name]["cycles"] += 1
    for o in ops:
        if o.kind == "send" and o.outcome.value == "ok":
            out[owner(o.end)]["acked"] += 1
    for x in report.anomalies["lost"]:
        out[owner(float(x["acked_at"]))]["lost"] += 1
    for name in list(out):
        ws = [w for w in report.windows if name in w.faults]
        out[name]["unavailability"] = window_stats(ws)
    return dict(out)


def report_json(r: ChaosResult) -> dict[str, Any]:
    return {
        "seed": r.seed,
        "valid": r.valid,
        "summary": r.report.summary(),
        "per_nemesis": r.per_nemesis,
        "unavailability": window_stats(r.report.windows),
        "windows": [w._asdict() | {"duration": w.duration} for w in r.report.windows],
        "faults": [f.to_json() for f in r.history.faults],
        "anomalies": {k: v[:50] for k, v in r.report.anomalies.items()},
        "unrecovered": r.unrecovered,
        "errors": r.errors,
    }
