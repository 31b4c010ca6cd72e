"""log.flush.interval.messages=1 with RF 3 and acks=all: an acknowledgement only covers records fsynced on
every ISR member (issue 18 item 1). A follower fsyncs what it fetched before its next Fetch reports the
new log end to the leader, so the high watermark (and the acks=all answer) cannot move past a follower's
unsynced records. Checked right after every acknowledgement on each broker's group-commit counter
(kafkad_log_fsync_records: messages its recovery points moved over, the only topic being this one),
never waiting for the periodic flush pass. Real ZooKeeper, three real kafkad, confluent-kafka.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import create_topic
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration.broker_process import free_port
from tests.integration.test_storage_faults import metrics

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

TOPIC = "synced"


def _synced_records(port: int) -> int:
    m = re.search(r"^kafkad_log_fsync_records_total (\S+)$", metrics(port), re.M)
    assert m is not None, "kafkad_log_fsync_records_total not exported"
    return int(float(m.group(1)))


def test_acks_all_acknowledges_only_what_every_isr_member_fsynced(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    ports = {bid: free_port() for bid in (1, 2, 3)}
    c = kafkad_cluster(
        zk_server.connect_string,
        3,
        overrides={"log.flush.interval.messages": "1", "min.insync.replicas": "3"},
        broker_overrides={b: {"metrics.listeners": f"http://127.0.0.1:{p}"} for b, p in ports.items()},
    )
    c.wait_registered([1, 2, 3], timeout_s=30)
    c.wait_controller(timeout_s=30)
    assert create_topic(c.bootstrap.split(",")[0], TOPIC, 1, 3)["error_code"] == 0
    c.wait_isr(TOPIC, 0, timeout_s=30)
    leader = c.wait_leader(TOPIC, 0, timeout_s=30).leader
    producer = Producer(
        {"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True}
    )
    acked: list[int] = []
    for i in range(40):
        producer.produce(
            TOPIC, value=b"v%d" % i, partition=0, on_delivery=lambda err, msg: acked.append(err is None)
        )
        assert producer.flush(60) == 0 and acked[-1], f"record {i} not acknowledged"
        for bid, port in ports.items():  # min.insync.replicas=3: the ack needed every replica
            synced = _synced_records(port)
            role = "leader" if bid == leader else "follower"
            assert synced >= i + 1, f"record {i} acknowledged, {role} {bid} has fsynced only {synced}"
    for bid in c.ids:
        assert "ERROR" not in c.broker(bid).log_text(since_start=False), f"broker {bid} logged an ERROR"
