"""The history of a chaos run: every client operation with its outcome and times, plus the nemesis' faults.

An operation is one of
- `send`: one produce of a unique value to an explicit partition; `ok` carries the acknowledged offset,
  `failed` means definitely not written, `unknown` means it may or may not have been written (timeouts,
  lost connections: the client cannot know);
- `poll`: what one reader got from one consume() call, as (partition, offset, value) records;
- `assign`: a reader's assignment changed (group rebalance, assign()/seek): its position may legally move
  back or forward, so the checker restarts its per-reader order checks there.
Faults are `Fault(name, target, start, end)` intervals. Times are seconds since the history's t0
(time.monotonic based). A history is saved and loaded as JSON lines, so a failed run can be re-checked.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, Self, TypeVar


class Outcome(StrEnum):
    OK = "ok"
    FAILED = "failed"
    UNKNOWN = "unknown"


class Rec(NamedTuple):
    partition: int
    offset: int
    value: str


class Op(NamedTuple):
    kind: str  # "send" | "poll" | "assign"
    client: str
    start: float
    end: float
    outcome: Outcome
    partition: int = -1  # send: the partition written to
    offset: int = -1  # send ok: the acknowledged offset
    value: str = ""  # send: the value written
    records: tuple[Rec, ...] = ()  # poll: what was read
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "client": self.client, "start": round(self.start, 6)}
        d["end"] = round(self.end, 6)
        d["outcome"] = self.outcome.value
        if self.kind == "send":
            d.update(partition=self.partition, offset=self.offset, value=self.value)
        if self.records:
            d["records"] = [list(r) for r in self.records]
        if self.error:
            d["error"] = self.error
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Op:
        return Op(
            kind=d["kind"],
            client=d["client"],
            start=float(d["start"]),
            end=float(d["end"]),
            outcome=Outcome(d["outcome"]),
            partition=int(d.get("partition", -1)),
            offset=int(d.get("offset", -1)),
            value=str(d.get("value", "")),
            records=tuple(Rec(int(p), int(o), str(v)) for p, o, v in d.get("records", [])),
            error=str(d.get("error", "")),
        )


class Fault(NamedTuple):
    name: str  # the nemesis, e.g. "kill9-leader"
    target: str  # what it hit, e.g. "broker 2"
    start: float
    end: float

    def to_json(self) -> dict[str, Any]:
        return {
            "fault": self.name,
            "target": self.target,
            "start": round(self.start, 6),
            "end": round(self.end, 6),
        }


def send(
    client: str, start: float, end: float, outcome: Outcome, partition: int, value: str, **kw: Any
) -> Op:
    """Shorthand for tests and recorders: a send op."""
    return Op("send", client, start, end, outcome, partition=partition, value=value, **kw)


def poll(client: str, start: float, end: float, records: Iterable[tuple[int, int, str]]) -> Op:
    return Op("poll", client, start, end, Outcome.OK, records=tuple(Rec(*r) for r in records))


def assign(client: str, at: float) -> Op:
    return Op("assign", client, at, at, Outcome.OK)


class _Jsonable(Protocol):
    def to_json(self) -> dict[str, Any]: ...


OpT = TypeVar("OpT", bound=_Jsonable)


@dataclass
class Recorder(Generic[OpT]):
    """Thread-safe recorder of ops and faults; `now()` is seconds since t0. Saved as JSON lines (the faults,
    then the ops); a subclass says how an op line is read back (`op_from_json`)."""

    ops: list[OpT] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def op_from_json(cls, d: dict[str, Any]) -> OpT:
        raise NotImplementedError

    def now(self) -> float:
        return time.monotonic() - self.t0

    def add(self, op: OpT) -> None:
        with self._lock:
            self.ops.append(op)

    def add_fault(self, fault: Fault) -> None:
        with self._lock:
            self.faults.append(fault)

    def snapshot(self) -> tuple[list[OpT], list[Fault]]:
        with self._lock:
            return list(self.ops), list(self.faults)

    def __iter__(self) -> Iterator[OpT]:
        return iter(self.snapshot()[0])

    def save(self, path: Path) -> None:
        ops, faults = self.snapshot()
        with open(path, "w") as f:
            for fault in faults:
                f.write(json.dumps(fault.to_json()) + "\n")
            for op in ops:
                f.write(json.dumps(op.to_json()) + "\n")

    @classmethod
    def load(cls, path: Path) -> Self:
        h = cls()
        for line in Path(path).read_text().splitlines():
            d = json.loads(line)
            if "fault" in d:
                h.faults.append(Fault(d["fault"], d["target"], float(d["start"]), float(d["end"])))
            else:
                h.ops.append(cls.op_from_json(d))
        return h


@dataclass
class History(Recorder[Op]):
    """The plain workload's history."""

    @classmethod
    def op_from_json(cls, d: dict[str, Any]) -> Op:
        return Op.from_json(d)
