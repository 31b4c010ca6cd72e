"""Short chaos mode on what exists without the cluster: one standalone kafkad (its log dir on a small
tmpfs), real idempotent acks=all producers, assign() readers and a group consumer, and a randomised
schedule of kill -9, SIGTERM, SIGSTOP, a full disk and a damaged segment (37 bytes appended past the last
batch after a clean shutdown; the broker must recover it) (seed printed; CHAOS_SEED replays). The checker must find no lost, duplicated, divergent, reordered or skipped record, and every
partition must be writable again after each fault."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.history import History
from tests.chaos.nemesis import DamagedSegment, DiskFull, Nemesis, ProcessFault, SingleBroker, tmpfs
from tests.chaos.runner import run_chaos
from tests.chaos.workload import Workload, create_topic
from tests.integration.broker_process import BrokerProcess

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

TOPIC = "chaos"
PARTITIONS = 3


@pytest.fixture()
def standalone(tmp_path: Path) -> Iterator[BrokerProcess]:
    with tmpfs(tmp_path / "fs", 48 << 20) as fs:
        b = BrokerProcess(
            tmp_path / "broker", {"num.partitions": str(PARTITIONS), "log.segment.bytes": "1048576"}
        )
        b.data_dir = fs / "data"
        with b:
            yield b


def nemeses_for(brokers: SingleBroker) -> list[Nemesis]:
    return [
        ProcessFault(brokers, "kill9", "leader", TOPIC, PARTITIONS),
        ProcessFault(brokers, "sigterm", "leader", TOPIC, PARTITIONS),
        ProcessFault(brokers, "sigstop", "leader", TOPIC, PARTITIONS),
        DiskFull(brokers, "leader", TOPIC, PARTITIONS),
        DamagedSegment(brokers, "leader", TOPIC, PARTITIONS),
    ]


def test_chaos_short_standalone(standalone: BrokerProcess, tmp_path: Path) -> None:
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 32))
    create_topic(standalone.bootstrap, TOPIC, PARTITIONS, 1)
    brokers = SingleBroker(standalone)
    nemeses = nemeses_for(brokers)
    h = History()
    w = Workload(
        h, standalone.bootstrap, TOPIC, PARTITIONS, writers=2, rate=40, assign_readers=1, group_consumers=1
    )
    res = run_chaos(
        w,
        nemeses,
        cycles=2 * len(nemeses),
        seed=seed,
        out_dir=tmp_path / "report",
        hold=(0.5, 2.0),
        quiet=(0.5, 1.0),
    )
    assert res.valid, res.explain() + "\nbroker log:\n" + standalone.log_text(since_start=False)[-4000:]
    assert res.report.counts["acked"] > 500
    assert {f.name for f in h.faults} == {n.name for n in nemeses}
    assert res.json_path is not None and res.json_path.exists()
    assert res.svg_path is not None and res.svg_path.read_text().startswith("<svg")


def test_damaged_segment_nemesis_alone(standalone: BrokerProcess, tmp_path: Path) -> None:
    create_topic(standalone.bootstrap, TOPIC, PARTITIONS, 1)
    brokers = SingleBroker(standalone)
    h = History()
    w = Workload(
        h, standalone.bootstrap, TOPIC, PARTITIONS, writers=1, rate=50, assign_readers=1, group_consumers=0
    )
    res = run_chaos(
        w,
        [DamagedSegment(brokers, "leader", TOPIC, PARTITIONS)],
        cycles=2,
        seed=int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 32)),
        out_dir=tmp_path / "report",
        hold=(0.2, 0.5),
        quiet=(0.5, 1.0),
        recover_timeout_s=20,
    )
    assert res.valid, res.explain() + "\nbroker log:\n" + standalone.log_text(since_start=False)[-4000:]
