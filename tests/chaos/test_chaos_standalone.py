"""Short chaos mode on one standalone kafkad (its log dir on a small tmpfs): real idempotent acks=all
producers, assign() readers and a group consumer, and a randomised schedule of kill -9, SIGTERM, SIGSTOP,
a full disk and a damaged segment (37 bytes appended past the last batch after a clean shutdown; the
broker must recover it). Seed printed; CHAOS_SEED replays. The checker must find no lost, duplicated,
divergent, reordered or skipped record, and every partition must be writable again after each fault."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.chaos.envs import standalone_env
from tests.chaos.history import History
from tests.chaos.runner import run_chaos
from tests.chaos.workload import Workload

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def seed() -> int:
    return int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 32))


def test_chaos_short_standalone(tmp_path: Path) -> None:
    with standalone_env(tmp_path / "env") as env:
        nemeses = env.nemeses()
        assert {n.name for n in nemeses} == {
            "kill9-leader", "sigterm-leader", "sigstop-leader", "kill9-controller", "sigterm-controller",
            "sigstop-controller", "disk-full-leader", "damaged-segment-leader",
        }  # fmt: skip
        nemeses = [n for n in nemeses if not n.name.endswith("-controller")]  # the same process here
        h = History()
        w = Workload(h, env.bootstrap, env.topic, env.partitions, writers=2, rate=40)
        res = run_chaos(
            w, nemeses, cycles=2 * len(nemeses), seed=seed(), out_dir=tmp_path / "report",
            hold=(0.5, 2.0), quiet=(0.5, 1.0), healthy=env.healthy,
        )  # fmt: skip
        log = env.brokers.broker(0).log_text(since_start=False)[-4000:]
    assert res.valid, res.explain() + "\nbroker log:\n" + log
    assert res.report.counts["acked"] > 500
    assert {f.name for f in h.faults} == {n.name for n in nemeses}
    assert res.json_path is not None and res.json_path.exists()
    assert res.svg_path is not None and res.svg_path.read_text().startswith("<svg")
