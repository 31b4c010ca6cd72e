"""Checks a transactional history (txn_history.py): what read_committed readers may and may not see.

A transaction counts as committed when its commit was acknowledged, or when any read_committed reader
returned one of its records (a record is only served once its commit marker is in the log); one whose abort
was acknowledged is aborted; the rest are undecided (a commit that timed out, a producer that died).

Anomaly classes (each a list of findings naming the records; empty = none found):
- aborted_read: a read_committed reader returned a record of an aborted transaction;
- partial: a committed transaction seen partly: the final read (client `final`, when the history has one)
  lacks some of its records, or a reader's continuous run over a partition (between two assignment changes)
  went past the offset of one of its records without returning it;
- duplicate: one output value at more than one (partition, offset), or one input consumed into the output
  of more than one committed transaction (exactly-once broken, e.g. across a restart of the processor);
- lso_stuck: an output partition's last stable offset stayed below a high watermark sampled at time t for
  longer than `txn_timeout_s` after t. Every transaction open at t began before t, and the coordinator
  aborts a transaction once it is older than the transaction timeout, so by then the LSO must have passed
  everything written before t: a producer that died mid-transaction and was never aborted, or a hanging
  transaction (a late write re-opening a finished one). Findings name the producers that died meanwhile.
- unprocessed (only with `expect_all_inputs`, after the processors drained the input): an acknowledged
  input that no committed transaction consumed.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.history import Outcome
from tests.chaos.txn_history import TxnOp, split_value

TXN_ANOMALY_CLASSES = ("aborted_read", "partial", "duplicate", "lso_stuck", "unprocessed")


@dataclass
class TxnReport:
    anomalies: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {k: [] for k in TXN_ANOMALY_CLASSES}
    )
    counts: dict[str, int] = field(default_factory=dict)
    lso_waits: list[float] = field(default_factory=list)  # per open-transaction sample: seconds to clear

    @property
    def valid(self) -> bool:
        return not any(self.anomalies.values())

    def found(self) -> list[str]:
        return [k for k in TXN_ANOMALY_CLASSES if self.anomalies[k]]

    def summary(self) -> dict[str, Any]:
        return {**self.counts, **{k: len(v) for k, v in self.anomalies.items()}, "valid": self.valid}

    def explain(self, limit: int = 10) -> str:
        lines = [f"transactional history summary: {self.summary()}"]
        for k in self.found():
            lines.append(f"{k}: {len(self.anomalies[k])}")
            lines += [f"  {x}" for x in self.anomalies[k][:limit]]
        return "\n".join(lines)


def check_txn(
    ops: Iterable[TxnOp], *, txn_timeout_s: float = 60.0, expect_all_inputs: bool = False
) -> TxnReport:
    ops = sorted(ops, key=lambda o: (o.start, o.end))
    r = TxnReport()
    txns = {o.txn: o for o in ops if o.kind == "txn"}
    polls = [o for o in ops if o.kind == "poll"]
    # where each output value was seen (acknowledged or read) and by whom
    positions: dict[str, set[tuple[int, int]]] = defaultdict(set)
    read_by: dict[str, set[str]] = defaultdict(set)  # value -> readers
    final_values: set[str] = set()
    has_final = False
    seen_txns: set[str] = set()
    for op in txns.values():
        for rec in op.records:
            if rec.offset >= 0:
                positions[rec.value].add((rec.partition, rec.offset))
    for o in polls:
        for rec in o.records:
            positions[rec.value].add((rec.partition, rec.offset))
            read_by[rec.value].add(o.client)
            seen_txns.add(split_value(rec.value)[0])
            if o.client == "final":
                final_values.add(rec.value)
                has_final = True
    aborted = {t for t, o in txns.items() if o.outcome is Outcome.FAILED}
    committed = {t for t, o in txns.items() if o.outcome is Outcome.OK} | (seen_txns & txns.keys()) - aborted

    for value, readers in sorted(read_by.items()):
        t, _ = split_value(value)
        if t in aborted:
            o = txns[t]
            r.anomalies["aborted_read"].append(
                {"txn": t, "value": value, "readers": sorted(readers), "aborted_at": round(o.end, 3)}
            )
    if has_final:
        for t in sorted(committed):
            o = txns[t]
            missing = [rec.value for rec in o.records if rec.value not in final_values]
            if missing:
                r.anomalies["partial"].append(
                    {"txn": t, "outcome": o.outcome.value, "records": len(o.records),
                     "missing_from_final": missing[:10], "missing": len(missing)}
                )  # fmt: skip
    _check_runs(ops, txns, committed, positions, r)
    for value, pos in sorted(positions.items()):
        if len(pos) > 1:
            r.anomalies["duplicate"].append({"value": value, "positions": sorted(pos)})
    consumed: dict[str, list[str]] = defaultdict(list)  # input value -> committed transactions using it
    for t in sorted(committed):
        for src in sorted({split_value(rec.value)[1] for rec in txns[t].records}):
            consumed[src].append(t)
    inputs = {rec.value for o in ops if o.kind == "input" for rec in o.records}
    for src, ts in sorted(consumed.items()):
        if len(ts) > 1 and src in inputs:
            r.anomalies["duplicate"].append({"input": src, "committed_txns": ts})
    if expect_all_inputs:
        for src in sorted(inputs - consumed.keys()):
            r.anomalies["unprocessed"].append({"input": src})
    _check_lso(ops, txn_timeout_s, r)
    r.counts = {
        "txns": len(txns),
        "committed": sum(1 for o in txns.values() if o.outcome is Outcome.OK),
        "aborted": len(aborted),
        "undecided": sum(1 for o in txns.values() if o.outcome is Outcome.UNKNOWN),
        "inputs": len(inputs),
        "records_read": sum(len(o.records) for o in polls),
        "lso_samples": sum(1 for o in ops if o.kind == "lso"),
        "died": sum(1 for o in ops if o.kind == "died"),
    }
    return r


def _check_runs(
    ops: Sequence[TxnOp],
    txns: dict[str, TxnOp],
    committed: set[str],
    positions: dict[str, set[tuple[int, int]]],
    r: TxnReport,
) -> None:
    """Within one reader's continuous run over a partition, every committed record between the first and
    the last offset it returned must have been returned (read_committed skips only aborted data and
    control records)."""
    located: dict[int, list[tuple[int, str]]] = defaultdict(list)  # partition -> (offset, value) committed
    for t in committed:
        for rec in txns[t].records:
            for p, off in positions.get(rec.value, ()):
                located[p].append((off, rec.value))
    for p in located:
        located[p].sort()
    runs: dict[tuple[str, int], list[int]] = {}
    finished: list[tuple[str, int, list[int]]] = []
    for o in ops:
        if o.kind == "assign":
            for key in [k for k in runs if k[0] == o.client]:
                finished.append((key[0], key[1], runs.pop(key)))
        elif o.kind == "poll":
            for rec in o.records:
                runs.setdefault((o.client, rec.partition), []).append(rec.offset)
    finished += [(c, p, offs) for (c, p), offs in runs.items()]
    reported: set[tuple[str, str]] = set()
    for client, p, offs in finished:
        lo, hi = min(offs), max(offs)
        got = set(offs)
        cands = located.get(p, [])
        i = bisect.bisect_right(cands, (lo, "\uffff"))
        while i < len(cands) and cands[i][0] < hi:
            off, value = cands[i]
            i += 1
            t = split_value(value)[0]
            if off in got or (client, t) in reported:
                continue
            reported.add((client, t))
            r.anomalies["partial"].append(
                {"txn": t, "reader": client, "partition": p, "passed_over": off, "value": value,
                 "run": [lo, hi]}
            )  # fmt: skip


def _check_lso(ops: Sequence[TxnOp], timeout_s: float, r: TxnReport) -> None:
    samples: dict[int, list[TxnOp]] = defaultdict(list)
    for o in ops:
        if o.kind == "lso":
            samples[o.partition].append(o)
    deaths = [o for o in ops if o.kind == "died"]
    for p, ss in sorted(samples.items()):
        ss.sort(key=lambda o: o.end)
        last_t = ss[-1].end
        covered_until = -1.0  # a finding covers the samples before its resolution: one finding per stall
        for i, s in enumerate(ss):
            if s.lso >= s.hw:
                continue  # nothing open
            cleared = next((x for x in ss[i + 1 :] if x.lso >= s.hw), None)
            waited = (cleared.end if cleared is not None else last_t) - s.end
            if cleared is not None:
                r.lso_waits.append(waited)
            if waited <= timeout_s or s.end < covered_until:
                continue
            until = cleared.end if cleared is not None else last_t
            covered_until = until if cleared is not None else float("inf")
            dead = [
                d.client
                for d in deaths
                if s.end - timeout_s <= d.end <= until and (not d.partitions or p in d.partitions)
            ]
            r.anomalies["lso_stuck"].append(
                {"partition": p, "since": round(s.end, 3), "lso": s.lso, "hw": s.hw,
                 "stuck_s": round(waited, 3), "cleared": cleared is not None, "died": dead}
            )  # fmt: skip
