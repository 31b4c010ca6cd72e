"""Figures as min/median/max over runs, ratios taken run by run, and targets checked against them.

A `Figure` keeps every run's value (so the JSON holds the raw data); `ratio` divides two figures run i by
run i (kafkad and its baseline measured back to back in run i share that moment's machine noise, which
matters on 2 shared cores), then summarizes the ratios.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured quantity over several runs."""

    name: str
    unit: str
    runs: tuple[float, ...]

    @property
    def min(self) -> float:
        return min(self.runs) if self.runs else float("nan")

    @property
    def median(self) -> float:
        return statistics.median(self.runs) if self.runs else float("nan")

    @property
    def max(self) -> float:
        return max(self.runs) if self.runs else float("nan")

    def as_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "runs": list(self.runs),
            "min": self.min,
            "median": self.median,
            "max": self.max,
        }


def figure(name: str, unit: str, runs: Sequence[float]) -> Figure:
    return Figure(name, unit, tuple(float(r) for r in runs))


def ratio(name: str, num: Figure, den: Figure) -> Figure:
    """num/den run by run (a 0 denominator gives inf)."""
    return Figure(
        name, "x", tuple(a / b if b else float("inf") for a, b in zip(num.runs, den.runs, strict=True))
    )


class Verdict(Enum):
    PASS = "PASS"
    MISS = "MISS"
    NONE = ""


@dataclass(frozen=True, slots=True)
class Target:
    """A goal for one figure's median: `value >= bound` or `value <= bound`."""

    op: str  # ">=" or "<="
    bound: float

    def check(self, value: float) -> Verdict:
        ok = value >= self.bound if self.op == ">=" else value <= self.bound
        return Verdict.PASS if ok else Verdict.MISS

    def __str__(self) -> str:
        return f"{self.op} {self.bound:g}"


@dataclass(slots=True)
class Row:
    """One table row: a kafkad figure, its baseline, their ratio, and the target if any."""

    section: str
    label: str
    value: Figure
    baseline: Figure | None = None
    baseline_name: str = ""
    ratio: Figure | None = None
    target: Target | None = None
    target_on_ratio: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        if self.target is None:
            return Verdict.NONE
        fig = self.ratio if self.target_on_ratio else self.value
        return Verdict.NONE if fig is None else self.target.check(fig.median)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"section": self.section, "label": self.label, "value": self.value.as_json()}
        if self.baseline is not None:
            out["baseline"] = {"name": self.baseline_name, **self.baseline.as_json()}
        if self.ratio is not None:
            out["ratio"] = self.ratio.as_json()
        if self.target is not None:
            out["target"] = {
                "on": "ratio" if self.target_on_ratio else "value",
                "op": self.target.op,
                "bound": self.target.bound,
                "verdict": self.verdict.value,
            }
        out.update(self.extra)
        return out


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return float(sorted_values[k])
