"""Short chaos mode against the 3-broker cluster (RF 3, min.insync.replicas=2) on a 3-node ZooKeeper
ensemble, every broker in its own network namespace with its own tmpfs log dir: one cycle of each nemesis
family (process faults of leaders and the controller incl. a SIGSTOP past the session timeout, ZooKeeper
member and leader loss, network partitions, a full disk and a damaged segment on a follower), recorded by
real clients and checked. Seed printed; CHAOS_SEED replays."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.chaos.envs import cluster_env
from tests.chaos.history import History
from tests.chaos.runner import run_chaos
from tests.chaos.workload import Workload

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

SHORT = [
    "kill9-leader",
    "kill9-controller",
    "sigterm-leader",
    "sigstop-leader",
    "zk-member-loss",
    "zk-leader-loss",
    "partition-isolate-leader",
    "partition-isolate-zk-controller",
    "disk-full-follower",
    "damaged-segment-follower",
]


def test_chaos_short_cluster(tmp_path: Path) -> None:
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 32))
    with cluster_env(tmp_path / "env", netns=True) as env:
        h = History()
        w = Workload(h, env.bootstrap, env.topic, env.partitions, writers=2, rate=40)
        res = run_chaos(
            w, env.nemeses(SHORT), cycles=len(SHORT), seed=seed, out_dir=tmp_path / "report",
            hold=(1.0, 3.0), quiet=(0.5, 1.0), healthy=env.healthy, describe=env.describe,
        )  # fmt: skip
        detail = env.describe()
    assert res.valid, res.explain() + "\n" + detail
    assert {f.name for f in h.faults} == set(SHORT)
