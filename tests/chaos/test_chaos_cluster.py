"""Short chaos mode against the 3-broker cluster (RF 3, min.insync.replicas=2) on a 3-node ZooKeeper
ensemble, every broker in its own network namespace with its own tmpfs log dir: one cycle of each nemesis
family (process faults of leaders and the controller incl. a SIGSTOP past the session timeout, ZooKeeper
member and leader loss, network partitions, a full disk and a damaged segment on a follower, lossy WAN links at
5 % and 30 % between the brokers and between the controller and ZooKeeper), recorded by real clients and
checked; the WAN figures (acks=all latency, ISR, catch-up) are printed. Seed printed; CHAOS_SEED replays."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from tests.chaos import wan
from tests.chaos.envs import WAN, cluster_env
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
    *WAN,
]


def test_chaos_short_cluster(tmp_path: Path) -> None:
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 32))
    with cluster_env(tmp_path / "env", netns=True) as env:
        h = History()
        w = Workload(h, env.bootstrap, env.topic, env.partitions, writers=2, rate=40)
        nemeses = env.nemeses(SHORT)
        res = run_chaos(
            w, nemeses, cycles=len(SHORT), seed=seed, out_dir=tmp_path / "report",
            hold=(1.0, 3.0), quiet=(0.5, 1.0), healthy=env.healthy, describe=env.describe,
        )  # fmt: skip
        detail = env.describe()
        ops, faults = h.snapshot()
        lossy = wan.report(nemeses, ops, faults, res.report.windows)
    print("WAN figures:", json.dumps(lossy, indent=1))
    assert res.valid, res.explain() + "\n" + detail
    assert {f.name for f in h.faults} == set(SHORT)
    assert set(lossy) == set(WAN) and all(x["ack_latency_lossy"] for x in lossy.values()), lossy
