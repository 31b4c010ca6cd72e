"""kafkad on a ZooKeeper 3.8 that requires SASL: the brokers log in with DIGEST-MD5 from the Client section of
the JAAS file named in KAFKA_OPTS (as Kafka's units do), create every znode with Kafka's ACLs
(zookeeper.set.acl=true), and a 3-broker cluster replicates. Another ZooKeeper user reads only what Kafka
makes world-readable and writes nothing; a client without SASL gets no session at all. A wrong password or
set.acl without credentials stops the broker at start with an error naming the setting."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.security import Id

from tests.cluster.cluster import KafkadCluster, ZkView
from tests.cluster.zk_security_checks import (
    assert_clean_logs,
    assert_locked_out,
    assert_secured,
    create_scram_user,
    read_all,
    sasl_options,
    write_jaas,
)
from tests.cluster.zookeeper import ZkServerSecurity, ZooKeeperServer
from tests.integration.broker_process import BrokerProcess, BrokerStartError

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

USERS = {"kafka": "kafka-secret", "intruder": "intruder-secret"}


@pytest.fixture()
def sasl_zk(tmp_path: Path) -> ZooKeeperServer:
    with ZooKeeperServer(
        tmp_path / "zk", security=ZkServerSecurity(sasl_users=USERS, require_sasl=True)
    ) as zk:
        yield zk  # type: ignore[misc]


def test_cluster_on_sasl_zookeeper_with_kafka_acls(
    sasl_zk: ZooKeeperServer,
    kafkad_cluster: Callable[..., KafkadCluster],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jaas = write_jaas(tmp_path / "kafka_jaas.conf", "kafka", USERS["kafka"])
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx1G -Djava.security.auth.login.config={jaas}")
    c = kafkad_cluster(
        sasl_zk.connect_string,
        3,
        overrides={"zookeeper.set.acl": "true"},
        zk_options=sasl_options("kafka", USERS["kafka"]),
        create_chroot=False,  # the brokers create it, with their ACL
    )
    c.wait_registered([1, 2, 3])
    c.wait_controller()
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("orders", 2, 3)])["orders"].result(60)
    for p in (0, 1):
        c.wait_isr("orders", p, 3)
    from confluent_kafka import Producer

    prod = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(200):
        prod.produce("orders", f"m{i}".encode())
    assert prod.flush(60) == 0
    assert sorted(read_all(c.bootstrap, "orders", 200)) == sorted(f"m{i}".encode() for i in range(200))
    create_scram_user(c.bootstrap, "alice", "alice-secret")

    kz = c.zk.client
    assert kz.get("/config/users/alice")[0]
    checked = assert_secured(kz, Id("sasl", "kafka"))
    assert checked > 30  # the chroot, Kafka's paths, topics, partitions, users...
    assert [(a.id.scheme, a.id.id) for a in kz.get_acls("/config/users/alice")[0]] == [("sasl", "kafka")]

    with ZkView(c.zookeeper_connect, **sasl_options("intruder", USERS["intruder"])) as intruder:
        assert_locked_out(intruder.client, "orders", "alice")

    # no SASL at all: this ZooKeeper gives such a client no session
    anon = KazooClient(hosts=c.zookeeper_connect, timeout=5)
    try:
        with pytest.raises(KazooException):
            anon.start(timeout=10)
            anon.get("/config/users/alice")
    finally:
        anon.stop()
        anon.close()

    # the cluster still works: a topic made now (controller's znodes written as sasl:kafka)
    admin.create_topics([NewTopic("later", 1, 3)])["later"].result(60)
    c.wait_isr("later", 0, 3)
    assert_secured(kz, Id("sasl", "kafka"))
    # the admin tools' --zookeeper logs in with the same KAFKA_OPTS, as Kafka's do
    r = subprocess.run(
        [sys.executable, "-m", "kafkad.tools.topics", "--zookeeper", c.zookeeper_connect, "--list"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0 and {"orders", "later"} <= set(r.stdout.split()), r.stderr + r.stdout
    assert_clean_logs(c.brokers)


def _lone_broker(tmp_path: Path, zk: ZooKeeperServer, name: str, **overrides: str) -> BrokerProcess:
    return BrokerProcess(
        tmp_path / name,
        {
            "zookeeper.connect": f"{zk.connect_string}/kafkad-{uuid.uuid4().hex[:8]}",
            "broker.id": "1",
            "zookeeper.connection.timeout.ms": "5000",
            **overrides,
        },
        startup_timeout_s=60,
    )


def _start_fails(b: BrokerProcess) -> tuple[int, str]:
    with pytest.raises(BrokerStartError):
        b.start()
    assert b.proc is not None
    code = b.proc.wait(10)
    b.kill9()
    return code, b.log_text()


def test_wrong_password_stops_the_broker_naming_the_jaas_file(
    sasl_zk: ZooKeeperServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jaas = write_jaas(tmp_path / "bad_jaas.conf", "kafka", "not-the-password")
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas}")
    code, log = _start_fails(
        _lone_broker(tmp_path, sasl_zk, "wrong-password", **{"zookeeper.set.acl": "true"})
    )
    assert code != 0
    assert "refused the SASL (DIGEST-MD5) login of user 'kafka'" in log, log
    assert f"Client section of {jaas}" in log and "java.security.auth.login.config" in log, log
    assert "Traceback" not in log and " started: " not in log, log


def test_set_acl_without_credentials_is_refused(
    sasl_zk: ZooKeeperServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    code, log = _start_fails(
        _lone_broker(tmp_path, sasl_zk, "no-credentials", **{"zookeeper.set.acl": "true"})
    )
    assert code == 2, log
    assert "zookeeper.set.acl: is true, but kafkad has no ZooKeeper identity" in log, log
    # without set.acl, on a ZooKeeper that requires SASL: refused at start, saying what to set
    code, log = _start_fails(_lone_broker(tmp_path, sasl_zk, "no-sasl"))
    assert code != 0
    assert "requires SASL authentication: set java.security.auth.login.config" in log, log


def test_login_refused_on_reconnect_is_retried(
    sasl_zk: ZooKeeperServer,
    kafkad_cluster: Callable[..., KafkadCluster],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ZooKeeper comes back refusing the broker's password (kazoo then stops reconnecting for good); the
    broker keeps trying, and once ZooKeeper accepts it again the broker is back in the cluster."""
    jaas = write_jaas(tmp_path / "kafka_jaas.conf", "kafka", USERS["kafka"])
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas}")
    c = kafkad_cluster(
        sasl_zk.connect_string,
        1,
        overrides={"zookeeper.set.acl": "true", "zookeeper.session.timeout.ms": "30000"},
        zk_options=sasl_options("kafka", USERS["kafka"]),
        create_chroot=False,
        # the refused password is this test's fault: kazoo and the broker's retry loop report it as ERROR
        expect_errors=[r"SessionClosedRequireSaslError", r"ZooKeeper connection given up"],
    )
    c.wait_registered([1])
    c.wait_controller()
    c.zk.close()  # the harness's own session, on the ZooKeeper about to restart
    c._view = None
    good = sasl_zk.node.security
    assert good is not None
    sasl_zk.stop()
    sasl_zk.node.security = ZkServerSecurity(sasl_users={"kafka": "changed"}, require_sasl=True)
    sasl_zk.start()
    b = c.broker(1)
    c.wait_until(
        lambda: "ZooKeeper connection given up" in b.log_text(), 60, "the broker to see its login refused"
    )
    assert b.running
    sasl_zk.stop()
    sasl_zk.node.security = good
    sasl_zk.start()

    def reconnected() -> bool:
        text = b.log_text()
        return "ZooKeeper connection connected" in text[text.index("ZooKeeper connection given up") :]

    c.wait_until(reconnected, 60, "the broker's next attempt to connect")
    c.wait_until(lambda: 1 in c.zk.broker_ids(), 60, "broker 1 registered")
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("after", 1, 1)])["after"].result(60)  # the controller writes ZooKeeper
    c.wait_leader("after", 0)
