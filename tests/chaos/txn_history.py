"""The history of a transactional (exactly-once) chaos run, beside history.py's plain one.

Ops (`TxnOp`), times in seconds since the history's t0:
- `input`: one acknowledged record of the input topic (`records` = ((partition, offset, value),));
- `txn`: one transaction attempt of a transactional producer. `txn` is its id, unique per attempt;
  `records` what it produced (partition, acknowledged offset or -1, value); `outcome` `ok` = commit
  acknowledged, `failed` = abort acknowledged (or never begun to write), `unknown` = the client cannot
  know (commit timed out, producer fenced or died mid-transaction);
- `poll`: what one read_committed reader got from one consume() (client `final`: the drain after the run,
  every output partition from the beginning to its last stable offset);
- `assign`: that reader's assignment changed (a rebalance, a new assign()): its continuous run ends;
- `lso`: one sample of an output partition's last stable offset (`lso`) and high watermark (`hw`);
- `died`: a transactional producer stopped mid-transaction without ending it (`partitions` it had
  written in that transaction); the coordinator must abort it when the transaction times out.
Every output value is `<txn id>|<source>`: the source is the input value it was made from (a
consume-transform-produce transaction) or a counter (a plain transactional write), so a reader's record
names its transaction and its input. Saved and loaded as JSON lines, as history.py's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from tests.chaos.history import Outcome, Rec, Recorder

SEP = "|"


class TxnOp(NamedTuple):
    kind: str  # "input" | "txn" | "poll" | "assign" | "lso" | "died"
    client: str
    start: float
    end: float
    outcome: Outcome = Outcome.OK
    txn: str = ""
    records: tuple[Rec, ...] = ()
    partition: int = -1  # lso
    lso: int = -1
    hw: int = -1
    partitions: tuple[int, ...] = ()  # died
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "client": self.client}
        d.update(start=round(self.start, 6), end=round(self.end, 6), outcome=self.outcome.value)
        if self.txn:
            d["txn"] = self.txn
        if self.records:
            d["records"] = [list(r) for r in self.records]
        if self.kind == "lso":
            d.update(partition=self.partition, lso=self.lso, hw=self.hw)
        if self.partitions:
            d["partitions"] = list(self.partitions)
        if self.error:
            d["error"] = self.error
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> TxnOp:
        return TxnOp(
            kind=d["kind"],
            client=d["client"],
            start=float(d["start"]),
            end=float(d["end"]),
            outcome=Outcome(d["outcome"]),
            txn=str(d.get("txn", "")),
            records=tuple(Rec(int(p), int(o), str(v)) for p, o, v in d.get("records", [])),
            partition=int(d.get("partition", -1)),
            lso=int(d.get("lso", -1)),
            hw=int(d.get("hw", -1)),
            partitions=tuple(int(p) for p in d.get("partitions", [])),
            error=str(d.get("error", "")),
        )


def out_value(txn: str, source: str) -> str:
    return f"{txn}{SEP}{source}"


def split_value(value: str) -> tuple[str, str]:
    """(txn id, source) of an output value; ("", value) for a value no transaction wrote."""
    txn, sep, source = value.partition(SEP)
    return (txn, source) if sep else ("", value)


# Shorthands for tests and recorders.
def txn(
    client: str,
    start: float,
    end: float,
    outcome: Outcome,
    txn_id: str,
    records: Iterable[tuple[int, int, str]],
    error: str = "",
) -> TxnOp:
    return TxnOp(
        "txn", client, start, end, outcome, txn=txn_id, records=tuple(Rec(*r) for r in records), error=error
    )


def tpoll(client: str, start: float, end: float, records: Iterable[tuple[int, int, str]]) -> TxnOp:
    return TxnOp("poll", client, start, end, records=tuple(Rec(*r) for r in records))


def tassign(client: str, at: float) -> TxnOp:
    return TxnOp("assign", client, at, at)


def tinput(client: str, at: float, partition: int, offset: int, value: str) -> TxnOp:
    return TxnOp("input", client, at, at, records=(Rec(partition, offset, value),))


def lso_sample(at: float, partition: int, lso: int, hw: int) -> TxnOp:
    return TxnOp("lso", "lso-monitor", at, at, partition=partition, lso=lso, hw=hw)


def died(client: str, at: float, partitions: Iterable[int], txn_id: str = "") -> TxnOp:
    return TxnOp("died", client, at, at, Outcome.UNKNOWN, txn=txn_id, partitions=tuple(partitions))


@dataclass
class TxnHistory(Recorder[TxnOp]):
    """The transactional workload's history; faults are history.Fault, saved the same way."""

    @classmethod
    def op_from_json(cls, d: dict[str, Any]) -> TxnOp:
        return TxnOp.from_json(d)
