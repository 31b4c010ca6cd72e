"""Committed offsets across restarts, kcat -G, cooperative-sticky, static membership, the CLI."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkad.tools import consumer_groups
from tests.integration.broker_process import BrokerProcess
from tests.integration.test_groups_support import (
    group_assignment,
    group_broker,
    wait_for,
)

pytestmark = pytest.mark.integration
KCAT_OPTS = ("-c", "20", "-f", "%p:%o\n", "-q")
__all__ = ["group_broker"]


def make_topic(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(20)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, value=f"v{i}".encode(), partition=part)
    assert p.flush(30) == 0


def consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    conf.update(extra)
    return Consumer(conf)


def poll_until(consumers: Sequence[Consumer], done: Callable[[], bool], timeout_s: float, what: str) -> int:
    """Poll every consumer round-robin until `done()`; returns the records consumed."""
    n = 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                n += 1
        if done():
            return n
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = consumer(bootstrap, group)
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return [tp.offset for tp in got]
    finally:
        c.close()


def test_committed_offsets_survive_clean_restart_and_kill9(
    group_broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    b = group_broker.bootstrap
    make_topic(b, "dur", 3, 10)
    c = consumer(b, "dg")
    c.subscribe(["dur"])
    seen = [0]

    def all_read() -> bool:
        return seen[0] >= 30

    def count() -> bool:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen[0] += 1
        return all_read()

    wait_for(count, 30, "30 records")
    c.commit(asynchronous=False)
    c.close()
    assert committed(b, "dg", "dur", 3) == [10, 10, 10]

    group_broker.stop()
    group_broker.start()
    assert committed(b, "dg", "dur", 3) == [10, 10, 10]

    # a "simple" commit (assign(), generation -1) on the now Empty group, then kill -9
    s = consumer(b, "dg")
    s.assign([TopicPartition("dur", 0, 7)])
    s.commit(offsets=[TopicPartition("dur", 0, 7)], asynchronous=False)
    s.close()
    group_broker.kill9()
    group_broker.start()
    assert committed(b, "dg", "dur", 3) == [7, 10, 10]

    capsys.readouterr()
    assert consumer_groups.main(["--bootstrap-server", b, "--describe", "--group", "dg"]) == 0
    out = capsys.readouterr().out
    assert "Consumer group 'dg' has no active members." in out
    row = next(line.split() for line in out.splitlines() if line.startswith("dg ") and " 0 " in line)
    assert row[:6] == ["dg", "dur", "0", "7", "10", "3"]

    reset = ["--reset-offsets", "--group", "dg", "--topic", "dur", "--to-earliest", "--execute"]
    assert consumer_groups.main(["--bootstrap-server", b, *reset]) == 0
    assert committed(b, "dg", "dur", 3) == [0, 0, 0]
    assert consumer_groups.main(["--bootstrap-server", b, "--delete", "--group", "dg"]) == 0
    capsys.readouterr()
    assert consumer_groups.main(["--bootstrap-server", b, "--list"]) == 0
    assert "dg" not in capsys.readouterr().out.split()


def test_kcat_balanced_consumer(group_broker: BrokerProcess) -> None:
    b = group_broker.bootstrap
    make_topic(b, "kc", 4, 5)
    out = subprocess.run(
        ["kcat", "-b", b, "-G", "kcat-group", "-X", "auto.offset.reset=earliest", *KCAT_OPTS, "kc"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = sorted(out.stdout.split())
    assert lines == sorted(f"{p}:{o}" for p in range(4) for o in range(5))
    assert committed(b, "kcat-group", "kc", 4) == [5, 5, 5, 5]


def test_cooperative_sticky_incremental_rebalance(group_broker: BrokerProcess) -> None:
    b = group_broker.bootstrap
    make_topic(b, "coop", 6, 20)
    revoked: list[list[int]] = []

    def on_revoke(_c: Consumer, tps: list[TopicPartition]) -> None:
        revoked.append(sorted(tp.partition for tp in tps))

    a = consumer(b, "coop-g", **{"partition.assignment.strategy": "cooperative-sticky"})
    a.subscribe(["coop"], on_revoke=on_revoke)

    def owned_by(n: int) -> Callable[[], bool]:
        def check() -> bool:
            state, members = group_assignment(b, "coop-g")
            sizes = sorted(len(v) for v in members.values())
            return state == "Stable" and len(members) == n and sum(sizes) == 6 and min(sizes) > 0

        return check

    got = poll_until([a], owned_by(1), 30, "the first member owning all 6 partitions")
    _, before = group_assignment(b, "coop-g")
    (a_before,) = before.values()
    second = consumer(b, "coop-g", **{"partition.assignment.strategy": "cooperative-sticky"})
    second.subscribe(["coop"])
    got += poll_until([a, second], owned_by(2), 40, "two members with 3 partitions each")
    _, after = group_assignment(b, "coop-g")
    assert sorted(len(v) for v in after.values()) == [3, 3]
    # incremental: the first member kept what it was not asked to give up
    a_after = next(v for v in after.values() if set(v) <= set(a_before))
    assert revoked, "cooperative rebalancing revokes only what moves, but it does revoke"
    assert sorted(set(a_before) - set(a_after)) == [("coop", p) for p in revoked[-1]]
    a.close()
    second.close()


def test_static_member_restart_keeps_assignment_without_rebalance(
    group_broker: BrokerProcess,
) -> None:
    b = group_broker.bootstrap
    make_topic(b, "stat", 4, 5)
    assigned: list[list[int]] = []

    def on_assign(_c: Consumer, tps: list[TopicPartition]) -> None:
        assigned.append(sorted(tp.partition for tp in tps))

    one = consumer(b, "stat-g", **{"group.instance.id": "inst-1"})
    two = consumer(b, "stat-g", **{"group.instance.id": "inst-2"})
    one.subscribe(["stat"])
    two.subscribe(["stat"], on_assign=on_assign)

    def stable_two() -> bool:
        state, members = group_assignment(b, "stat-g")
        split = len(members) == 2 and all(len(v) == 2 for v in members.values())
        # and the member saw its assignment (librdkafka calls on_assign from a later poll)
        return state == "Stable" and split and bool(assigned) and len(assigned[-1]) == 2

    poll_until([one, two], stable_two, 40, "two static members with 2 partitions each")
    _, members = group_assignment(b, "stat-g")
    old_one = next(mid for mid in members if mid.startswith("inst-1-"))
    one.close()  # static members send no LeaveGroup: the slot waits for its instance
    assigns_before = len(assigned)

    again = consumer(b, "stat-g", **{"group.instance.id": "inst-1"})
    again.subscribe(["stat"])
    new_ids: list[str] = []

    def rejoined() -> bool:
        state, now = group_assignment(b, "stat-g")
        ids = [mid for mid in now if mid.startswith("inst-1-")]
        new_ids[:] = ids
        return state == "Stable" and bool(ids) and ids[0] != old_one

    poll_until([again, two], rejoined, 30, "inst-1 back in its slot")
    _, now = group_assignment(b, "stat-g")
    assert now[new_ids[0]] == members[old_one]  # same partitions, new member id
    poll_until([again, two], lambda: True, 3, "a few more polls")
    assert len(assigned) == assigns_before  # the other member saw no rebalance
    again.close()
    two.close()
