"""The lossy-link nemesis (tests/chaos/wan.py) on a real ChaosNet: the nftables rules drop about the share of
packets asked for, on the links asked for only, and heal() removes them; report() turns a history into the
figures (acks=all latency while lossy against the no-fault baseline, ISR figures, unavailability)."""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import pytest

from tests.chaos.history import Fault, Op, Outcome
from tests.chaos.netns import ChaosNet
from tests.chaos.wan import WanLoss, report
from tests.cluster.cluster import wait_until

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

PINGS = 400
# 30 % each way: a ping's request and its reply each cross one rule, so 1 - 0.7 ** 2 = 51 % of round trips
# fail; 35-67 % is 6.4 standard deviations either side (400 pings)
LOW, HIGH = 35.0, 67.0


def loss_percent(net: ChaosNet, host: int, addr: str) -> float:
    r = subprocess.run(
        [*net.exec_prefix(host), "ping", "-q", "-c", str(PINGS), "-i", "0.002", "-W", "1", addr],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    m = re.search(r"(\d+) packets transmitted, (\d+) received", r.stdout)
    assert m is not None, r.stdout + r.stderr
    sent, got = int(m.group(1)), int(m.group(2))
    return 100.0 * (sent - got) / sent


class _Brokers:
    """The one Brokers method the zk scope uses: who is the controller (no cluster needed here)."""

    ids = [1, 2, 3]

    def controller_id(self) -> int:
        return 2

    def broker(self, bid: int) -> object:
        class Running:
            running = True

        return Running()


def test_loss_on_the_links_asked_for_and_healed(tmp_path: Path) -> None:
    sizes: list[dict[int, int] | None] = [{0: 3}]
    with ChaosNet([1, 2, 3]) as net:
        wait_until(lambda: loss_percent(net, 1, net.addr(2)) == 0.0, 20, "a clean ns1 -> ns2 link")
        brokers = WanLoss(
            net, _Brokers(), "brokers", 30, "t", 1,  # type: ignore[arg-type]
            isr_sizes=lambda: sizes[0], full_isr=3, min_hold_s=0.0,
        )  # fmt: skip
        assert brokers.inject(random.Random(1)) == "every broker-to-broker link"
        assert LOW <= loss_percent(net, 1, net.addr(2)) <= HIGH
        assert LOW <= loss_percent(net, 3, net.addr(1)) <= HIGH
        assert loss_percent(net, 1, net.zk_addr) == 0.0, "ZooKeeper's link is not a broker-to-broker link"
        assert loss_percent(net, 1, net.client_addr) == 0.0
        brokers.heal()
        assert loss_percent(net, 1, net.addr(2)) == 0.0
        zk = WanLoss(
            net, _Brokers(), "zk", 30, "t", 1,  # type: ignore[arg-type]
            isr_sizes=lambda: sizes[0], full_isr=3, min_hold_s=0.0,
        )  # fmt: skip
        assert zk.inject(random.Random(1)) == "broker 2 <-> zookeeper"  # the controller
        assert LOW <= loss_percent(net, 2, net.zk_addr) <= HIGH  # both directions of its ZooKeeper link
        assert loss_percent(net, 1, net.zk_addr) == 0.0 and loss_percent(net, 2, net.addr(3)) == 0.0
        sizes[0] = {0: 2}  # an ISR shrinks while the link is lossy, and is whole again after the heal
        wait_until(lambda: zk._sampler is not None and zk._sampler._min == 2, 10, "the sampler saw it")
        zk.heal()
        sizes[0] = {0: 3}
        assert loss_percent(net, 2, net.zk_addr) == 0.0
        (cycle,) = zk.figures()
    assert cycle["target"] == "broker 2 <-> zookeeper" and cycle["min_isr"] == 2
    assert cycle["isr_short_s"] > 0 and cycle["catch_up_s"] is not None


def test_report_compares_lossy_acks_with_the_no_fault_baseline() -> None:
    nem = WanLoss.__new__(WanLoss)  # figures only: no network
    nem.name, nem.cycles, nem._sampler = "wan-loss30-brokers", [], None
    nem.cycles.append({"target": "x", "held_s": 6.0, "isr_short_s": 2.5, "min_isr": 2, "catch_up_s": 0.4})

    def send(start: float, took: float) -> Op:
        return Op("send", "w0", start, start + took, Outcome.OK, 0, 1, f"v{start}")

    ops = [
        send(1.0, 2.0),
        send(6.0, 0.01),
        send(7.0, 0.02),
        send(31.0, 0.5),
        send(32.0, 1.5),
        send(38.0, 0.6),  # within 3 s of the heal: catching up, no baseline
        send(60.0, 0.03),
    ]
    faults = [Fault("wan-loss30-brokers", "x", 30.0, 36.0)]
    fig = report([nem, object()], ops, faults, [])["wan-loss30-brokers"]
    assert fig["cycles"] == 1
    assert fig["ack_latency_lossy"]["count"] == 2 and fig["ack_latency_lossy"]["max_ms"] == 1500.0
    # neither the first second after the first ack nor a fault and its 3 s after are baseline
    assert fig["ack_latency_no_fault"] == {"count": 3, "p50_ms": 20.0, "p99_ms": 30.0, "max_ms": 30.0}
    assert fig["isr_short_s"] == {"min": 2.5, "median": 2.5, "max": 2.5} and fig["min_isr"] == 2
    assert fig["catch_up_s"]["median"] == 0.4 and fig["not_caught_up"] == 0
