"""The schedule replays from its seed and covers every nemesis before repeating one; per-nemesis figures
and the plot name the faults they belong to."""

from __future__ import annotations

from tests.chaos.checker import check
from tests.chaos.history import Fault, Outcome, send
from tests.chaos.plot import availability_svg
from tests.chaos.runner import per_nemesis, schedule


def test_schedule_replays_from_its_seed() -> None:
    a = schedule(42, 5, 12, (1.0, 3.0), (0.5, 1.0))
    b = schedule(42, 5, 12, (1.0, 3.0), (0.5, 1.0))
    assert [(s.nemesis, s.hold_s, s.quiet_s) for s in a] == [(s.nemesis, s.hold_s, s.quiet_s) for s in b]
    assert sorted(s.nemesis for s in a[:5]) == [0, 1, 2, 3, 4]  # each once before any twice
    assert all(1.0 <= s.hold_s <= 3.0 and 0.5 <= s.quiet_s <= 1.0 for s in a)
    c = schedule(43, 5, 12, (1.0, 3.0), (0.5, 1.0))
    assert [s.hold_s for s in a] != [s.hold_s for s in c]


def test_per_nemesis_figures_and_plot() -> None:
    ops = [send("w", t / 10, t / 10 + 0.01, Outcome.OK, 0, f"v{t}", offset=t) for t in range(0, 30)]
    ops += [send("w", t / 10, t / 10 + 0.01, Outcome.OK, 0, f"v{t}", offset=t) for t in range(60, 90)]
    ops += [send("w", 3.0, 6.0, Outcome.UNKNOWN, 0, "stuck")]
    faults = [Fault("kill9-leader", "broker 1", 2.95, 3.0), Fault("sigstop-leader", "broker 2", 7.0, 7.5)]
    r = check(ops, faults, threshold_s=1.0)
    figs = per_nemesis(r, faults, ops)
    assert figs["kill9-leader"]["cycles"] == 1 and figs["kill9-leader"]["acked"] == 10
    assert figs["kill9-leader"]["unavailability"]["count"] == 1
    assert 2.9 < figs["kill9-leader"]["unavailability"]["max_s"] < 3.2
    assert figs["sigstop-leader"]["acked"] == 20 and figs["sigstop-leader"]["unavailability"]["count"] == 0
    svg = availability_svg(ops, faults, r.windows, 1)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "kill9-leader" in svg and "sigstop-leader" in svg and "unavailable" in svg
