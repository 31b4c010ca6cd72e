"""A chaos schedule over the transactional workload (txn_workload.py), then txn_checker.py and a JSON report.

As runner.py's run_chaos (same seeded schedule), with the transactional nemeses beside the chaos suite's:
- `kill9-txn-coordinator`: kill -9 of the broker that leads the __transaction_state partition of a
  processor's transactional id, mid-transaction (the processors commit every batch), restarted at heal;
- `kill-processor`: a processor dies mid-transaction, its transaction left open with its offsets pending:
  only the coordinator's timeout can end it (the LSO-stuck check of the checker);
- any runner nemesis (`kill9-leader` of the output topic's partitions: a partition leader mid-transaction).
After each heal the run waits, bounded, until a transaction commits again. `recovery_s` per fault is the time
from the fault's start to the next acknowledged commit (for kill9-txn-coordinator: the coordinator's failover
until the next commit succeeds). Then the source stops, the processors drain the input, the final read.
"""

from __future__ import annotations

import json
import logging
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkad.coordinator.group.records import partition_for
from tests.chaos.history import Fault, Outcome
from tests.chaos.nemesis import Brokers, Nemesis
from tests.chaos.runner import schedule
from tests.chaos.txn_checker import TxnReport, check_txn
from tests.chaos.txn_diag import describe_pipeline, describe_processors
from tests.chaos.txn_history import TxnHistory, TxnOp
from tests.chaos.txn_workload import TxnWorkload

log = logging.getLogger(__name__)

TXN_STATE_TOPIC = "__transaction_state"


class KillProcessor:
    name = "kill-processor"

    def __init__(self, workload: TxnWorkload) -> None:
        self.w = workload

    def inject(self, rng: random.Random) -> str:
        return self.w.kill_processor(rng.randrange(len(self.w.processors)))

    def heal(self) -> None:
        pass


class TxnCoordinatorKill:
    """kill -9 of the broker coordinating a processor's transactional id; restarted at heal."""

    name = "kill9-txn-coordinator"

    def __init__(self, brokers: Brokers, workload: TxnWorkload, state_partitions: int) -> None:
        self.brokers, self.w, self.n = brokers, workload, state_partitions
        self.target: int | None = None

    def inject(self, rng: random.Random) -> str:
        proc = rng.choice(self.w.processors)
        txn_id = proc._txn_id()
        leader = self.brokers.leader_of(TXN_STATE_TOPIC, partition_for(txn_id, self.n))
        if leader is None or not self.brokers.broker(leader).running:
            raise AssertionError(f"no running coordinator for {txn_id} ({leader})")
        self.brokers.kill9(leader)
        self.target = leader
        return f"broker {leader} ({txn_id})"

    def heal(self) -> None:
        t, self.target = self.target, None
        assert t is not None, "heal without inject"
        self.brokers.restart(t)


@dataclass
class TxnChaosResult:
    seed: int
    report: TxnReport
    history: TxnHistory
    recovery: dict[str, list[float]]
    drained: bool
    unrecovered: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    json_path: Path | None = None
    diagnostics: str = ""  # the brokers' and processors' view of a stall (txn_diag), else empty

    @property
    def valid(self) -> bool:
        return self.report.valid and self.drained and not self.unrecovered and not self.errors

    def explain(self) -> str:
        return (
            f"txn chaos seed {self.seed} drained={self.drained}\n{self.report.explain()}\n"
            f"unrecovered: {self.unrecovered}\nerrors: {self.errors[:20]}\nrecovery: {self.recovery}"
            + (f"\n{self.diagnostics}" if self.diagnostics else "")
        )

    def table(self) -> dict[str, dict[str, Any]]:
        """Per nemesis: cycles and recovery (fault start to the next commit) min/median/max, seconds."""
        out: dict[str, dict[str, Any]] = {}
        for name, xs in sorted(self.recovery.items()):
            out[name] = {"cycles": len(xs)}
            if xs:
                out[name].update(min_s=round(min(xs), 2), median_s=round(statistics.median(xs), 2),
                                 max_s=round(max(xs), 2))  # fmt: skip
        return out


def recovery_times(ops: Sequence[TxnOp], faults: Sequence[Fault]) -> dict[str, list[float]]:
    commits = sorted(o.end for o in ops if o.kind == "txn" and o.outcome is Outcome.OK)
    out: dict[str, list[float]] = defaultdict(list)
    for f in faults:
        nxt = next((t for t in commits if t > f.start), None)
        if nxt is not None:
            out[f.name].append(nxt - f.start)
    return dict(out)


def run_txn_chaos(
    workload: TxnWorkload,
    nemeses: Sequence[Nemesis],
    *,
    cycles: int,
    seed: int,
    out_dir: Path,
    hold: tuple[float, float] = (1.0, 3.0),
    quiet: tuple[float, float] = (1.0, 2.0),
    recover_timeout_s: float = 90.0,
    warmup_s: float = 2.0,
    lso_slack_s: float = 15.0,
    healthy: Callable[[], bool] = lambda: True,
) -> TxnChaosResult:
    print(f"txn chaos seed {seed} ({cycles} cycles of {[n.name for n in nemeses]})", flush=True)
    h = workload.h
    out_dir.mkdir(parents=True, exist_ok=True)
    unrecovered: list[dict[str, Any]] = []
    errors: list[str] = []
    rng = random.Random(seed ^ 0x5EED)
    workload.start()
    drained = False
    diagnostics = ""
    try:
        _wait_commit(workload, 0.0, recover_timeout_s, "warm-up", unrecovered)
        time.sleep(warmup_s)  # steady traffic before the first fault (schedule spacing, not a sync)
        for i, step in enumerate(schedule(seed, len(nemeses), cycles, hold, quiet)):
            if unrecovered:
                break
            nem = nemeses[step.nemesis]
            t0 = h.now()
            try:
                target = nem.inject(rng)
            except Exception as e:
                errors.append(f"cycle {i} {nem.name}: inject failed: {e!r}"[-3000:])
                break
            time.sleep(max(step.hold_s, float(getattr(nem, "min_hold_s", 0.0))))  # the fault's duration
            try:
                nem.heal()
            except Exception as e:
                errors.append(f"cycle {i} {nem.name}: heal failed: {e!r}"[-3000:])
            t1 = h.now()
            h.add_fault(Fault(nem.name, target, t0, t1))
            log.info("cycle %d: %s %s held %.1fs", i, nem.name, target, t1 - t0)
            deadline = time.monotonic() + recover_timeout_s
            while not healthy() and time.monotonic() < deadline:
                time.sleep(0.1)
            _wait_commit(workload, t1, max(1.0, deadline - time.monotonic()), f"cycle {i} {nem.name}",
                         unrecovered)  # fmt: skip
            time.sleep(step.quiet_s)  # spacing between faults
        drained = workload.drain(timeout_s=30.0 if unrecovered or errors else 180.0)
        if not drained or unrecovered:  # while the processors still run: what holds them
            diagnostics = stall_diagnostics(workload)
            print(diagnostics, flush=True)
    finally:
        errors += workload.stop()
    try:
        workload.final_read(timeout_s=30.0 if unrecovered or errors else 180.0)
    except AssertionError as e:
        errors.append(f"final read: {e}"[-3000:])
    errors += [e for e in workload.errors() if ": processor:" in e or ": start:" in e or "callback" in e]
    ops, faults = h.snapshot()
    timeout_s = workload.txn_timeout_ms / 1000 + lso_slack_s
    report = check_txn(ops, txn_timeout_s=timeout_s, expect_all_inputs=drained)
    res = TxnChaosResult(seed, report, h, recovery_times(ops, faults), drained, unrecovered, errors,
                         diagnostics=diagnostics)  # fmt: skip
    h.save(out_dir / "txn-chaos-history.jsonl")
    res.json_path = out_dir / "txn-chaos-report.json"
    res.json_path.write_text(
        json.dumps(
            {"seed": seed, "valid": res.valid, "drained": drained, "summary": report.summary(),
             "client_offset_resets": {p.client: p.resets for p in workload.processors},
             "consume_errors": {p.client: p.consume_errors for p in workload.processors},
             "recovery": res.table(), "anomalies": {k: v[:50] for k, v in report.anomalies.items()},
             "unrecovered": unrecovered, "errors": errors[:50],
             "diagnostics": diagnostics.splitlines()},
            indent=1, default=str,
        )
    )  # fmt: skip
    print(f"txn chaos report {res.json_path}, valid={res.valid}", flush=True)
    return res


def stall_diagnostics(w: TxnWorkload) -> str:
    """The processors' and the brokers' view of a pipeline that stopped (txn_diag)."""
    return (
        describe_processors(w.processors)
        + "\n"
        + describe_pipeline(w.bootstrap, w.group, w.source, w.sink, w.partitions)
    )


def _wait_commit(
    w: TxnWorkload, since: float, timeout_s: float, what: str, unrecovered: list[dict[str, Any]]
) -> None:
    deadline = time.monotonic() + timeout_s
    while not w.committed_since(since):
        if time.monotonic() >= deadline:
            unrecovered.append({"after": what, "no_commit_for_s": timeout_s, "errors": w.errors()[-5:]})
            return
        time.sleep(0.05)
