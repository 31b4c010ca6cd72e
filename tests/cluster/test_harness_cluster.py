"""The KafkadCluster harness itself, without relying on the controller or replication being done:
N kafkad processes in cluster mode start with their own ids, dirs and ports, survive kill -9 / SIGSTOP /
SIGTERM / restart through the harness, and ZkView decodes Kafka's znode JSON (written here by the test)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from tests.cluster.cluster import KafkadCluster, ZkView, wait_until
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]


def _connectable(bootstrap: str) -> bool:
    host, port = bootstrap.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def test_cluster_processes_and_faults(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3)
    assert c.ids == [1, 2, 3]
    assert len(set(c.bootstrap.split(","))) == 3
    for bid, b in c.brokers.items():
        text = b.config_path.read_text()
        assert f"broker.id={bid}\n" in text and text.count("broker.id=") == 1
        assert f"zookeeper.connect={zk_server.connect_string}{c.chroot}\n" in text
        assert b.running and _connectable(b.bootstrap)
    # the chroot exists in ZooKeeper
    with ZkView(zk_server.connect_string) as root:
        assert root.client.exists(c.chroot) is not None

    c.kill9(2)
    assert not c.broker(2).running and not _connectable(c.broker(2).bootstrap)
    port = c.broker(2).port
    c.restart(2)
    assert c.broker(2).port == port and _connectable(c.broker(2).bootstrap)

    c.sigstop(3)
    with socket.create_connection(("127.0.0.1", c.broker(3).port), timeout=2) as s:
        s.settimeout(0.5)
        s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")  # ApiVersions v0
        with pytest.raises(TimeoutError):
            s.recv(4)  # frozen: no answer
        c.sigcont(3)
        s.settimeout(30)
        assert len(s.recv(4)) == 4  # resumed: the pending request is answered

    assert c.sigterm(1) == 0
    assert not c.broker(1).running
    c.restart(1)
    assert c.running_ids() == [1, 2, 3]


def test_zkview_decodes_kafka_znodes(zk_server: ZooKeeperServer) -> None:
    chroot = "/zkview-test"
    k = KazooClient(hosts=zk_server.connect_string + chroot, timeout=10)
    with ZkView(zk_server.connect_string) as root:
        root.client.ensure_path(chroot)
    k.start(timeout=30)
    try:
        k.create("/controller", b'{"version":1,"brokerid":2,"timestamp":"1700000000000"}', ephemeral=True)
        k.create("/controller_epoch", b"5")
        k.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
        k.create("/brokers/ids/3", b"{}", ephemeral=True)
        assign = {"version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]}, "topic_id": "x"}
        k.create("/brokers/topics/t", json.dumps(assign).encode(), makepath=True)
        state = {"version": 1, "leader": 3, "leader_epoch": 4, "controller_epoch": 5, "isr": [3, 1]}
        k.create("/brokers/topics/t/partitions/1/state", json.dumps(state).encode(), makepath=True)
        k.set("/brokers/topics/t/partitions/1/state", json.dumps(state).encode())
        with ZkView(zk_server.connect_string + chroot) as v:
            assert v.controller_id() == 2
            assert v.controller_epoch() == 5
            assert v.broker_ids() == [1, 3]
            assert v.broker_epoch(1) is not None and v.broker_epoch(2) is None
            assert v.topics() == ["t"]
            assert v.assignment("t") == {0: [1, 2, 3], 1: [2, 3, 1]}
            s = v.partition_state("t", 1)
            assert s is not None
            assert (s.leader, s.leader_epoch, s.isr, s.controller_epoch, s.zk_version) == (3, 4, (3, 1), 5, 1)
            assert v.partition_state("t", 0) is None
            k.delete("/controller")
            wait_until(lambda: v.controller_id() is None, 10, "controller znode gone")
    finally:
        k.stop()
        k.close()
