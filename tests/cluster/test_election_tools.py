"""Operations a rack needs, through the CLIs users type (issue 10 item 4): `kafkad-topics --zookeeper`,
`kafkad-leader-election --election-type preferred|unclean`, with a real ZooKeeper and three kafkad."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]


def tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"kafkad.tools.{name}", *args], capture_output=True, text=True, timeout=60
    )


def test_topics_and_leader_election_through_zookeeper(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3, overrides={"controlled.shutdown.retry.backoff.ms": "200"})
    c.wait_registered([1, 2, 3], timeout_s=30)
    controller = c.wait_controller(timeout_s=30)
    zk = c.zookeeper_connect
    r = tool(
        "topics",
        "--zookeeper",
        zk,
        "--create",
        "--topic",
        "pe",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
    )
    assert r.returncode == 0, r.stderr
    assert "Created topic pe." in r.stdout
    assignment = c.zk.assignment("pe")
    assert sorted(assignment) == [0, 1, 2] and all(sorted(v) == [1, 2, 3] for v in assignment.values())
    for p in range(3):
        c.wait_leader("pe", p, timeout_s=10)

    # leadership off the preferred replicas: a clean stop of a non-controller moves its partitions away
    victim = next(b for b in c.ids if b != controller)
    preferred_by_victim = [p for p, reps in assignment.items() if reps[0] == victim]
    assert preferred_by_victim
    assert c.sigterm(victim) == 0
    c.restart(victim)
    c.wait_registered([victim], timeout_s=30)
    c.wait_until(
        lambda: all(victim in c.partition_state("pe", p).isr for p in range(3)),  # type: ignore[union-attr]
        30,
        f"broker {victim} back in every ISR",
    )
    assert all(c.partition_state("pe", p).leader != victim for p in preferred_by_victim)  # type: ignore[union-attr]

    r = tool("leader_election", "--zookeeper", zk, "--election-type", "preferred", "--all-topic-partitions")
    assert r.returncode == 0, r.stderr
    moved = ", ".join(f"pe-{p}" for p in sorted(preferred_by_victim))
    assert f"Successfully completed leader election (PREFERRED) for partitions {moved}" in r.stdout, r.stdout
    for p, reps in assignment.items():
        assert c.partition_state("pe", p).leader == reps[0]  # type: ignore[union-attr]
    r = tool(
        "leader_election",
        "--zookeeper",
        zk,
        "--election-type",
        "PREFERRED",
        "--topic",
        "pe",
        "--partition",
        "0",
    )
    assert r.returncode == 0 and "Valid replica already elected for partitions pe-0" in r.stdout, (
        r.stdout + r.stderr
    )

    # unclean: RF 2 on (a, b); b stops (leaves the ISR), then a stops; b alone comes back, out of the ISR
    others = [b for b in c.ids if b != controller]
    a, b = others
    r = tool("topics", "--zookeeper", zk, "--create", "--topic", "u", "--replica-assignment", f"{a}:{b}")
    assert r.returncode == 0, r.stderr
    c.wait_leader("u", 0, timeout_s=10)
    c.wait_until(lambda: sorted(c.partition_state("u", 0).isr) == sorted([a, b]), 30, "u-0 fully in sync")  # type: ignore[union-attr]
    assert c.sigterm(b) == 0
    assert c.sigterm(a) == 0
    c.wait_until(lambda: c.partition_state("u", 0).leader == -1, 30, "u-0 without a leader")  # type: ignore[union-attr]
    c.restart(b)
    c.wait_registered([b], timeout_s=30)
    r = tool(
        "leader_election",
        "--zookeeper",
        zk,
        "--election-type",
        "preferred",
        "--topic",
        "u",
        "--partition",
        "0",
    )
    assert r.returncode == 1 and "u-0: PreferredLeaderNotAvailableException" in r.stderr, r.stdout + r.stderr
    r = tool(
        "leader_election", "--zookeeper", zk, "--election-type", "unclean", "--topic", "u", "--partition", "0"
    )
    assert r.returncode == 0, r.stderr
    assert "Successfully completed leader election (UNCLEAN) for partitions u-0" in r.stdout
    st = c.partition_state("u", 0)
    assert st is not None and st.leader == b and st.isr == (b,)
