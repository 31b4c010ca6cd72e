"""Operations a rack needs, through the CLIs users type (issue 10 item 4): `kafkad-topics --zookeeper`,
`kafkad-leader-election --election-type preferred|unclean`, with a real ZooKeeper and three kafkad."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

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


def test_reassign_partitions_moves_replicas_and_data(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster], tmp_path: Path
) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    c = kafkad_cluster(zk_server.connect_string, 3)
    c.wait_registered([1, 2, 3], timeout_s=30)
    c.wait_controller(timeout_s=30)
    zk = c.zookeeper_connect
    r = tool("topics", "--zookeeper", zk, "--create", "--topic", "mv", "--replica-assignment", "1:2,2:1")
    assert r.returncode == 0, r.stderr
    for p in range(2):
        c.wait_leader("mv", p, timeout_s=10)
    prod = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(200):
        prod.produce("mv", value=f"v{i}".encode(), partition=i % 2)
    assert prod.flush(30) == 0

    moves = tmp_path / "moves.json"
    target = {0: [3, 2], 1: [2, 3]}
    moves.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": "mv", "partition": p, "replicas": r} for p, r in target.items()],
            }
        )
    )
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "mv"}]}))
    r = tool(
        "reassign_partitions",
        "--zookeeper",
        zk,
        "--generate",
        "--topics-to-move-json-file",
        str(topics),
        "--broker-list",
        "2,3",
    )
    assert r.returncode == 0, r.stderr
    proposed = json.loads(r.stdout.split("Proposed partition reassignment configuration\n")[1])
    assert all(set(e["replicas"]) == {2, 3} for e in proposed["partitions"])

    r = tool("reassign_partitions", "--zookeeper", zk, "--execute", "--reassignment-json-file", str(moves))
    assert r.returncode == 0, r.stderr
    assert "Successfully started partition reassignments for mv-0,mv-1" in r.stdout
    assert '"replicas":[1,2]' in r.stdout  # the rollback JSON
    c.wait_until(
        lambda: (
            tool(
                "reassign_partitions", "--zookeeper", zk, "--verify", "--reassignment-json-file", str(moves)
            ).returncode
            == 0
        ),
        60,
        "reassignment complete",
    )
    assert c.zk.assignment("mv") == target
    topic_json = json.loads(c.zk.client.get("/brokers/topics/mv")[0])
    assert topic_json["adding_replicas"] == {} and topic_json["removing_replicas"] == {}
    for p, reps in target.items():
        st = c.partition_state("mv", p)
        assert st is not None and st.leader in reps and set(st.isr) <= set(reps)
    r = tool("reassign_partitions", "--zookeeper", zk, "--list")
    assert r.returncode == 0 and "No partition reassignments found." in r.stdout
    # broker 1 no longer holds mv-0 (StopReplica with delete)
    c.wait_until(
        lambda: (
            not any(
                d.name.startswith("mv-0") and not d.name.endswith("-delete")
                for d in (c.broker(1).dir / "data").iterdir()
            )
        ),
        30,
        "mv-0 removed from broker 1",
    )
    # every record is still there, now served by the new replicas
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g-mv", "enable.auto.commit": False})
    cons.assign([TopicPartition("mv", p, OFFSET_BEGINNING) for p in range(2)])
    got: set[bytes] = set()
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is None and (v := m.value()) is not None:
            got.add(v)
    cons.close()
    assert got == {f"v{i}".encode() for i in range(200)}

    # the pre-2.4 way, as zkCli users do it: write /admin/reassign_partitions; the znode goes when done
    c.zk.client.create(
        "/admin/reassign_partitions",
        json.dumps(
            {"version": 1, "partitions": [{"topic": "mv", "partition": 0, "replicas": [1, 3]}]}
        ).encode(),
    )
    c.wait_until(lambda: c.zk.client.exists("/admin/reassign_partitions") is None, 30, "the znode consumed")
    assert c.zk.assignment("mv")[0] == [1, 3]


def test_partitions_configs_deletion_and_auto_rebalance(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(
        zk_server.connect_string,
        3,
        overrides={
            "leader.imbalance.check.interval.seconds": "1",
            "controlled.shutdown.retry.backoff.ms": "200",
        },
    )
    c.wait_registered([1, 2, 3], timeout_s=30)
    controller = c.wait_controller(timeout_s=30)
    others = [b for b in c.ids if b != controller]
    # every call goes to a broker that is not the controller
    boot = ["--bootstrap-server", c.broker(others[0]).bootstrap]
    r = tool("topics", *boot, "--create", "--topic", "ops", "--partitions", "2", "--replication-factor", "3")
    assert r.returncode == 0, r.stderr
    r = tool("topics", *boot, "--alter", "--topic", "ops", "--partitions", "5")
    assert r.returncode == 0, r.stderr
    assert sorted(c.zk.assignment("ops")) == [0, 1, 2, 3, 4]
    for p in range(5):
        st = c.wait_leader("ops", p, timeout_s=15)
        assert sorted(st.isr) == [1, 2, 3]

    r = tool(
        "configs",
        *boot,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "ops",
        "--add-config",
        "retention.ms=12345",
    )
    assert r.returncode == 0, r.stderr
    cfg = json.loads(c.zk.client.get("/config/topics/ops")[0])
    assert cfg == {"version": 1, "config": {"retention.ms": "12345"}}
    changes = c.zk.client.get_children("/config/changes")
    assert any(
        json.loads(c.zk.client.get(f"/config/changes/{n}")[0])["entity_path"] == "topics/ops" for n in changes
    )
    # every broker applies it (described from another broker than the one altered)
    c.wait_until(
        lambda: (
            "retention.ms=12345"
            in tool(
                "configs",
                "--bootstrap-server",
                c.broker(others[1]).bootstrap,
                "--describe",
                "--entity-type",
                "topics",
                "--entity-name",
                "ops",
            ).stdout
        ),
        20,
        "the new config seen from another broker",
    )

    # automatic preferred leader rebalance: after a clean bounce of a broker, leadership comes back to it
    victim = others[1]
    preferred = [p for p, reps in c.zk.assignment("ops").items() if reps[0] == victim]
    assert preferred
    assert c.sigterm(victim) == 0
    assert all(c.partition_state("ops", p).leader != victim for p in preferred)  # type: ignore[union-attr]
    c.restart(victim)
    c.wait_until(
        lambda: all(c.partition_state("ops", p).leader == victim for p in preferred),  # type: ignore[union-attr]
        45,
        "leadership back on the preferred replica",
    )

    r = tool("topics", *boot, "--delete", "--topic", "ops")
    assert r.returncode == 0, r.stderr
    c.wait_until(lambda: "ops" not in c.zk.topics(), 30, "ops gone from /brokers/topics")
    assert c.zk.client.get_children("/admin/delete_topics") == []
    assert c.zk.client.exists("/config/topics/ops") is None
    for b in c.ids:

        def removed(b: int = b) -> bool:
            return not any(
                d.name.startswith("ops-") and not d.name.endswith("-delete")
                for d in c.broker(b).data_dir.iterdir()
            )

        c.wait_until(removed, 30, f"ops removed from broker {b}")
