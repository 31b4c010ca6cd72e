"""One group of 3 confluent-kafka + 1 kafka-python + 1 aiokafka consumers over a 12-partition topic.

Every partition is owned by exactly one member; a kill -9 of a member moves its partitions after
the session timeout; no record is lost and a record comes twice only if nobody had committed past it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.integration.broker_process import BrokerProcess
from tests.integration.test_groups_support import (
    ROOT,
    group_assignment,
    group_broker,
    wait_for,
)

pytestmark = pytest.mark.integration
__all__ = ["group_broker"]  # the fixture, re-exported for pytest

PARTITIONS = 12
PER_PARTITION = 100


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen[str]
    events: list[tuple[str, int, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append((ev["ev"], ev["p"], ev["o"]))

    def snapshot(self) -> list[tuple[str, int, int]]:
        with self.lock:
            return list(self.events)


def start_worker(kind: str, name: str, bootstrap: str, topic: str, group: str, logs: Path) -> Worker:
    code = "from tests.integration.test_groups_workers import main; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, kind, bootstrap, topic, group],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=open(logs / f"{name}.err", "w"),  # noqa: SIM115 - the child owns it
        text=True,
    )
    w = Worker(name, proc)
    threading.Thread(target=w.read, daemon=True).start()
    return w


def produce(bootstrap: str, topic: str, rounds: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(rounds):
        for part in range(PARTITIONS):
            p.produce(topic, value=f"v{i}".encode(), partition=part)
    assert p.flush(30) == 0


def consumed(workers: list[Worker]) -> Counter[tuple[int, int]]:
    c: Counter[tuple[int, int]] = Counter()
    for w in workers:
        c.update((p, o) for ev, p, o in w.snapshot() if ev == "rec")
    return c


def assert_disjoint_cover(members: dict[str, list[tuple[str, int]]], topic: str) -> None:
    owned = [tp for tps in members.values() for tp in tps]
    assert sorted(owned) == [(topic, p) for p in range(PARTITIONS)], members


def assert_redelivery_only_after_last_commit(workers: list[Worker]) -> None:
    """A record seen twice was not committed past by the consumer that had it before."""
    for p_o, n in consumed(workers).items():
        if n < 2:
            continue
        p, o = p_o
        committed_past = 0
        for w in workers:
            seen = False
            for ev, ep, eo in w.snapshot():
                if ev == "rec" and (ep, eo) == p_o:
                    seen = True
                elif ev == "commit" and ep == p and eo > o and seen:
                    committed_past += 1
                    seen = False
        assert committed_past <= 1, f"{p_o} redelivered after a commit past it"


@pytest.fixture
def workers(group_broker: BrokerProcess, tmp_path: Path) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        if w.proc.poll() is None:
            os.kill(w.proc.pid, signal.SIGKILL)
            w.proc.wait(10)


def test_mixed_clients_share_partitions_and_survive_kill9(
    group_broker: BrokerProcess, workers: list[Worker], tmp_path: Path
) -> None:
    bootstrap, topic, group = group_broker.bootstrap, "mixed", "mixed-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(20)
    produce(bootstrap, topic, PER_PARTITION)

    kinds = ["confluent", "confluent", "confluent", "kafka-python", "aiokafka"]
    for i, kind in enumerate(kinds):
        workers.append(start_worker(kind, f"{kind}-{i}", bootstrap, topic, group, tmp_path))

    def settled(n: int) -> bool:
        state, members = group_assignment(bootstrap, group)
        owned = sorted(tp for tps in members.values() for tp in tps)
        return state == "Stable" and len(members) == n and len(owned) == PARTITIONS

    wait_for(lambda: settled(5), 60, "5 members sharing 12 partitions")
    _, members = group_assignment(bootstrap, group)
    assert_disjoint_cover(members, topic)
    assert all(members.values()), "every member owns a partition"
    total = PARTITIONS * PER_PARTITION
    wait_for(lambda: len(consumed(workers)) == total, 60, "every record of round 1")

    # kill -9 one confluent member: its partitions move after session.timeout.ms (6 s)
    victim = workers[0]
    os.kill(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait(10)
    produce(bootstrap, topic, PER_PARTITION)
    wait_for(lambda: settled(4), 40, "4 members taking over all 12 partitions")
    _, members = group_assignment(bootstrap, group)
    assert_disjoint_cover(members, topic)
    wait_for(lambda: len(consumed(workers)) == 2 * total, 60, "every record of round 2")

    got = consumed(workers)
    assert set(got) == {(p, o) for p in range(PARTITIONS) for o in range(2 * PER_PARTITION)}
    assert_redelivery_only_after_last_commit(workers)
