"""kafkad-zookeeper-security-migration on a running cluster: 3 brokers that log in to ZooKeeper (SASL, JAAS in
KAFKA_OPTS) but created their znodes open (zookeeper.set.acl=false, the chroot made by an operator) are
secured while a producer writes; afterwards a client without the brokers' identity reads only what Kafka
makes world-readable and writes nothing, the brokers keep working on their now-secured znodes (a topic
created after), and every acknowledged record is read back. `--zookeeper.acl unsecure` opens them again.
Without credentials the tool refuses to run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.security import Id

from tests.cluster.cluster import KafkadCluster, ZkView
from tests.cluster.zk_security_checks import (
    BackgroundProducer,
    assert_clean_logs,
    assert_locked_out,
    assert_open,
    assert_secured,
    create_scram_user,
    marker_zxid,
    read_all,
    run_migration,
    sasl_options,
    write_jaas,
)
from tests.cluster.zookeeper import ZkServerSecurity, ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

USERS = {"kafka": "kafka-secret"}


@pytest.fixture()
def zk(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """SASL available, not required: clients without it still get a session (only ACLs stop them)."""
    with ZooKeeperServer(tmp_path / "zk", security=ZkServerSecurity(sasl_users=USERS)) as server:
        yield server


def test_secure_a_running_cluster_while_producing(
    zk: ZooKeeperServer,
    kafkad_cluster: Callable[..., KafkadCluster],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jaas = write_jaas(tmp_path / "kafka_jaas.conf", "kafka", USERS["kafka"])
    kafka_opts = f"-Djava.security.auth.login.config={jaas}"
    monkeypatch.setenv("KAFKA_OPTS", kafka_opts)
    c = kafkad_cluster(zk.connect_string, 3, zk_options=sasl_options("kafka", USERS["kafka"]))
    c.wait_registered([1, 2, 3])
    c.wait_controller()
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("orders", 3, 3)])["orders"].result(60)
    for p in range(3):
        c.wait_isr("orders", p, 3)
    create_scram_user(c.bootstrap, "alice", "alice-secret")
    kz = c.zk.client
    anon_connect = c.zookeeper_connect
    with ZkView(anon_connect) as anon:  # started unsecured: anyone may read the credentials
        assert anon.client.get("/config/users/alice")[0]

    refused = run_migration(c.zookeeper_connect, "secure")
    assert refused.returncode != 0 and "no ZooKeeper identity" in refused.stderr, refused.stderr

    producer = BackgroundProducer(c.bootstrap, "orders").start()
    c.wait_until(lambda: len(producer.acked) >= 200, 60, "200 records acknowledged before the migration")
    before = marker_zxid(kz)
    done = run_migration(c.zookeeper_connect, "secure", kafka_opts=kafka_opts)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "secured" in done.stdout
    after = len(producer.acked)
    c.wait_until(lambda: len(producer.acked) >= after + 200, 60, "200 more records after the migration")
    acked = producer.stop()

    assert assert_secured(kz, Id("sasl", "kafka"), created_before=before) > 30
    with ZkView(anon_connect) as anon:
        assert_locked_out(anon.client, "orders", "alice")
    # the brokers write on their secured znodes: a new topic's assignment and partition states
    admin.create_topics([NewTopic("later", 1, 3)])["later"].result(60)
    c.wait_isr("later", 0, 3)

    got = read_all(c.bootstrap, "orders", len(acked))
    assert sorted(got) == sorted(acked), f"acked {len(acked)}, read {len(got)}"
    assert len(set(got)) == len(got)
    assert_clean_logs(c.brokers)

    again = marker_zxid(kz)
    opened = run_migration(c.zookeeper_connect, "unsecure", kafka_opts=kafka_opts)
    assert opened.returncode == 0, opened.stderr + opened.stdout
    assert assert_open(kz, created_before=again) > 30
