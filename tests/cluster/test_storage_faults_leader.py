"""A leader's I/O error reaches the controller and its leadership moves, as in Kafka (KIP-112; issue 10).

Three real kafkad processes on a real ZooKeeper, a topic of 6 partitions with RF 3 (each broker leads two).
The directory of partition 0 on its leader is made immutable (`chattr +i`: even root gets EPERM creating
files in it) while an acks=all producer writes to it: when the leader's log rolls, the append fails and
partition 0 goes offline on that broker alone. The broker writes /log_dir_event_notification/log_dir_event_
<seq>; the controller asks it about its replicas (LeaderAndIsr), gets KAFKA_STORAGE_ERROR for partition 0
and elects a new leader from the ISR without it. Checked: leadership moves off it within a bounded time,
Metadata lists it as offline replica, every record the producer sent is acknowledged (it follows the move),
and the other partition that broker leads is still led by it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from kafkad.protocol import ApiKey
from tests.cluster.cluster import KafkadCluster, PartitionState
from tests.cluster.test_election import create_topic, request
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

TOPIC = "damaged"
# from the fault to the move: the producer's writes until the roll fails, the notification, the controller's
# LeaderAndIsr round trip and election (~0.1 s of it), and every write acknowledged (a wait parked on the
# failed partition used to hold its connection's answers for the whole request timeout, 30 s)
MOVE_BOUND_S = 20.0


def _metadata(c: KafkadCluster, bid: int) -> dict[int, dict[str, Any]]:
    resp = request(c.broker(bid).bootstrap, ApiKey.METADATA, 8, {"topics": [{"name": TOPIC}]})
    return {p["partition_index"]: p for p in resp["topics"][0]["partitions"]}


def _full_isr(c: KafkadCluster, p: int) -> bool:
    st = c.partition_state(TOPIC, p)
    return st is not None and len(st.isr) == 3


def _moved_off(c: KafkadCluster, victim: int) -> PartitionState | None:
    st = c.partition_state(TOPIC, 0)
    return st if st is not None and st.leader not in (-1, victim) else None


def _lists_offline(c: KafkadCluster, bid: int, victim: int) -> bool:
    return bool(_metadata(c, bid)[0]["offline_replicas"] == [victim])


def test_a_leader_io_error_moves_its_leadership_and_shows_the_offline_replica(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster], immutable: list[Path]
) -> None:
    from confluent_kafka import Producer

    c = kafkad_cluster(zk_server.connect_string, 3, overrides={"log.segment.bytes": "16384"})
    c.expect_errors.append(r"is offline \(KAFKA_STORAGE_ERROR\)")  # the test's own I/O error on the leader
    c.wait_registered([1, 2, 3], timeout_s=30)
    controller = c.wait_controller(timeout_s=30)
    assert create_topic(c.broker(controller).bootstrap, TOPIC, 6, 3)["error_code"] == 0
    for p in range(6):
        c.wait_until(partial(_full_isr, c, p), 30, f"{TOPIC}-{p} full ISR")
    victim = c.leader_of(TOPIC, 0)
    assert victim is not None
    also_led = [p for p in range(1, 6) if c.leader_of(TOPIC, p) == victim]
    assert also_led, "the victim leads another partition"

    delivered: list[Any] = []
    prod = Producer(
        {
            "bootstrap.servers": c.bootstrap,
            "acks": "all",
            "message.timeout.ms": 60000,
            "linger.ms": 5,
            "batch.size": 4096,  # below log.segment.bytes: a bigger batch is refused (RECORD_LIST_TOO_LARGE)
        }
    )

    def send(n: int) -> None:
        for _ in range(n):
            prod.produce(TOPIC, value=b"v" * 300, partition=0, on_delivery=lambda e, _m: delivered.append(e))
            prod.poll(0)
        assert prod.flush(60) == 0

    send(20)
    d = c.broker(victim).data_dir / f"{TOPIC}-0"
    subprocess.run(["chattr", "+i", str(d)], check=True, capture_output=True)
    immutable.append(d)
    t0 = time.monotonic()
    send(200)  # ~70 KB: the leader's log must roll, which the immutable directory refuses

    st = c.wait_until(
        partial(_moved_off, c, victim),
        MOVE_BOUND_S,
        f"{TOPIC}-0 led by another broker than {victim}",
    )
    moved_s = time.monotonic() - t0
    assert moved_s < MOVE_BOUND_S, f"the fault, the producer's retries and the move took {moved_s:.1f} s"
    assert victim not in st.isr, st
    print(f"leadership of {TOPIC}-0 moved off broker {victim} {moved_s:.2f} s after the fault began")
    assert delivered and all(e is None for e in delivered), [e for e in delivered if e is not None][:5]
    n = len(delivered)
    send(50)  # the producer keeps working on the new leader
    assert len(delivered) == n + 50 and all(e is None for e in delivered)

    for bid in c.ids:  # every broker's Metadata shows the offline replica
        c.wait_until(
            partial(_lists_offline, c, bid, victim),
            10,
            f"broker {bid}'s Metadata lists {victim} offline for {TOPIC}-0",
        )
    md = _metadata(c, victim)
    assert md[0]["leader_id"] == st.leader and victim not in md[0]["isr_nodes"]
    for p in also_led:  # the broker's other partitions are untouched: still led by it, still online
        assert c.leader_of(TOPIC, p) == victim
        assert md[p]["offline_replicas"] == [] and md[p]["leader_id"] == victim
    log = c.broker(victim).log_text()
    assert "Traceback" not in log
    assert not c.zk.client.get_children("/log_dir_event_notification"), "the controller deleted it"
