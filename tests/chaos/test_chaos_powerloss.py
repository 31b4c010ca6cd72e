"""Short power-loss chaos (issue 18): 3 brokers on LazyFS log dirs, 3 power losses per scenario (see
powerloss_scenarios.py). Seed printed; CHAOS_SEED replays.

- whole rack, Kafka's defaults: the checker sees acknowledged records lost, replicas still converge on disk,
  no corrupt record is served, every partition is writable again after each power loss;
- one appliance, defaults: a valid history (replication covers it);
- whole rack, log.flush.interval.messages=1: a valid history (0 lost, duplicated, divergent): the fsync
  comes before the answer (issue 18 items 1-2).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.chaos.powerloss_scenarios import run_scenario

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]


def _run(name: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 32))
    sr = run_scenario(name, tmp_path / "env", tmp_path / "report", cycles=3, seed=seed)
    print(f"{name}: {sr.row}")
    assert not sr.problems, f"seed {seed}\n" + "\n".join(sr.problems)
    assert sr.row["cycles"] == 3 and sr.row["bytes_dropped"] > 0


def test_rack_power_loss_with_defaults_loses_acknowledged_records_but_replicas_converge(
    tmp_path: Path,
) -> None:
    _run("rack-defaults", tmp_path)


def test_one_appliance_power_loss_with_defaults_loses_nothing(tmp_path: Path) -> None:
    _run("one-defaults", tmp_path)


def test_rack_power_loss_with_flush_messages_1_loses_nothing(tmp_path: Path) -> None:
    _run("rack-flush1", tmp_path)
