"""Cluster mode keeps SCRAM credentials and ACLs in ZooKeeper in Kafka's layout, shared by every broker: a
user made through broker 1 (kafkad-configs) authenticates on broker 2; an ACL added through broker 1
(kafkad-acls) is in /kafka-acl and enforced by broker 2, through the change notifications.

Inter-broker traffic still runs over PLAINTEXT as User:ANONYMOUS (inter.broker.listener.name is not
supported yet), so ANONYMOUS is a super user here; the clients under test use the SASL listener."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.cluster.cluster import KafkadCluster, wait_until
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration.broker_process import free_port

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def _tool(module: str, port: int, *args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", module, "--bootstrap-server", f"127.0.0.1:{port}", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout
    return r.stdout


def test_credentials_and_acls_shared_through_zookeeper(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    ports = {1: free_port(), 2: free_port()}
    sasl = {1: free_port(), 2: free_port()}
    c = kafkad_cluster(
        zk_server.connect_string,
        2,
        ports=ports,
        overrides={
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",
        },
        broker_overrides={
            b: {"listeners": f"PLAINTEXT://127.0.0.1:{ports[b]},SASL_PLAINTEXT://127.0.0.1:{sasl[b]}"}
            for b in (1, 2)
        },
    )
    c.wait_registered([1, 2], timeout_s=60)
    c.wait_controller(timeout_s=60)
    _tool("kafkad.tools.configs", ports[1], "--alter", "--entity-type", "users", "--entity-name", "bob",
          "--add-config", "SCRAM-SHA-256=[iterations=4096,password=bob-secret]")  # fmt: skip
    node = json.loads(c.zk.client.get("/config/users/bob")[0])
    assert node["version"] == 1 and node["config"]["SCRAM-SHA-256"].startswith("salt=")
    assert "iterations=4096" in node["config"]["SCRAM-SHA-256"] and "bob-secret" not in json.dumps(node)

    bob2: dict[str, str | int | float | bool] = {
        "bootstrap.servers": f"127.0.0.1:{sasl[2]}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
    }
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 2)])["orders"].result(60)

    def bob_sees() -> set[str]:
        return set(AdminClient(bob2).list_topics(timeout=20).topics)

    assert "orders" not in bob_sees()  # authenticated on broker 2 with the credential made on broker 1
    _tool("kafkad.tools.acls", ports[1], "--add", "--allow-principal", "User:bob", "--operation", "Read",
          "--topic", "orders")  # fmt: skip
    acl = json.loads(c.zk.client.get("/kafka-acl/Topic/orders")[0])
    assert acl["acls"] == [
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "*"}
    ]
    assert c.zk.client.get_children("/kafka-acl-changes")
    wait_until(lambda: "orders" in bob_sees(), 30, "broker 2 to apply the ACL made through broker 1")
    assert "User:bob" in _tool("kafkad.tools.acls", ports[2], "--list", "--topic", "orders")
    # Broker 2 refuses bob's writes to orders (READ only), whichever broker leads it.
    from kafkad.tools.client import KafkaClient
    from kafkad.tools.client_security import ClientSecurity

    sec = ClientSecurity.from_properties({k: str(v) for k, v in bob2.items() if k != "bootstrap.servers"})
    with KafkaClient(f"127.0.0.1:{sasl[2]}", security=sec) as client:
        produce = {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                   "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": b""}]}]}  # fmt: skip
        resp = client.send(0, produce)
        assert resp["responses"][0]["partition_responses"][0]["error_code"] == 29


def test_replication_over_sasl_ssl(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster], tmp_path: Path
) -> None:
    """inter.broker.listener.name=SASL_SSL: brokers register that endpoint, and the controller's requests and
    the followers' fetches go through TLS + SASL/PLAIN as User:broker; an acks=all write is replicated."""
    from confluent_kafka import Producer

    from tests.integration.pki import make_pki

    pki = make_pki(tmp_path / "pki")
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="broker" password="broker-secret" user_broker="broker-secret";'
    )
    ports = {1: free_port(), 2: free_port()}
    secure = {1: free_port(), 2: free_port()}
    c = kafkad_cluster(
        zk_server.connect_string,
        2,
        ports=ports,
        overrides={
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
            "ssl.keystore.location": str(pki.server),
            "ssl.truststore.location": str(pki.ca),
            "min.insync.replicas": "2",
        },
        broker_overrides={
            b: {"listeners": f"PLAINTEXT://127.0.0.1:{ports[b]},SASL_SSL://127.0.0.1:{secure[b]}"}
            for b in (1, 2)
        },
    )
    c.wait_registered([1, 2], timeout_s=60)
    c.wait_controller(timeout_s=60)
    for b in (1, 2):
        reg = json.loads(c.zk.client.get(f"/brokers/ids/{b}")[0])
        # The inter-broker endpoint first, then the others (clients get the one of their own listener).
        assert reg["endpoints"] == [
            f"SASL_SSL://127.0.0.1:{secure[b]}",
            f"PLAINTEXT://127.0.0.1:{ports[b]}",
        ], reg
        assert reg["listener_security_protocol_map"] == {"SASL_SSL": "SASL_SSL", "PLAINTEXT": "PLAINTEXT"}
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("replicated", 1, 2)])["replicated"].result(60)
    state = c.wait_isr("replicated", 0, size=2)
    errors: list[object] = []
    p = Producer({"bootstrap.servers": c.broker(state.leader).bootstrap, "acks": "all"})
    for i in range(20):
        p.produce("replicated", f"m{i}".encode(), on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert p.flush(60) == 0 and not errors, (
        errors
    )  # min.insync.replicas=2: the follower fetched over SASL_SSL
    logs = c.broker(1).log_text() + c.broker(2).log_text()
    assert "User:broker authenticated with PLAIN on SASL_SSL" in logs
