"""kafkad on a ZooKeeper 3.8 secure port that requires client certificates (Netty, PEM key and trust stores):
the brokers connect with Kafka's zookeeper.ssl.* keys and PEM files as their listeners take them, their
certificate's subject is their ZooKeeper identity (x509), every znode carries Kafka's ACLs for it, and a
3-broker cluster replicates. A client on the plain port (no certificate) reads only what Kafka makes
world-readable and writes nothing. A certificate ZooKeeper does not trust, or a trust store that does not
hold ZooKeeper's CA, stops the broker at start naming the setting."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.security import Id

from tests.cluster.cluster import KafkadCluster, ZkView
from tests.cluster.zk_security_checks import (
    assert_clean_logs,
    assert_locked_out,
    assert_open,
    assert_secured,
    create_scram_user,
    marker_zxid,
    read_all,
    run_migration,
)
from tests.cluster.zookeeper import ZkServerSecurity, ZooKeeperServer
from tests.integration.broker_process import BrokerProcess, BrokerStartError
from tests.integration.pki import Pki, make_pki

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


@pytest.fixture()
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture()
def tls_zk(tmp_path: Path, pki: Pki) -> Iterator[ZooKeeperServer]:
    sec = ZkServerSecurity(tls_keystore=pki.server, tls_truststore=pki.ca)
    with ZooKeeperServer(tmp_path / "zk", security=sec) as zk:
        yield zk


def _client_pem(pki: Pki, name: str, ca: str = "ca") -> tuple[Path, Path, Path]:
    """(key+chain PEM as the brokers take it, cert, key) of a client certificate CN=<name>."""
    cert, key = pki.client(name, ca=ca)
    pem = pki.dir / f"{name}.pem"
    pem.write_text(key.read_text() + cert.read_text())
    return pem, cert, key


def _tls_keys(keystore: Path, truststore: Path) -> dict[str, str]:
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keystore.location": str(keystore),
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(truststore),
        "zookeeper.ssl.truststore.type": "PEM",
    }


def test_cluster_on_mutual_tls_zookeeper_with_kafka_acls(
    tls_zk: ZooKeeperServer, pki: Pki, kafkad_cluster: Callable[..., KafkadCluster], tmp_path: Path
) -> None:
    # one identity for the brokers (as Kafka's docs ask: the ACLs name one certificate subject)
    pem, cert, key = _client_pem(pki, "kafka-broker")
    c = kafkad_cluster(
        tls_zk.secure_connect_string,
        3,
        overrides={"zookeeper.set.acl": "true", **_tls_keys(pem, pki.ca)},
        zk_options={"use_ssl": True, "certfile": str(cert), "keyfile": str(key), "ca": str(pki.ca)},
        create_chroot=False,
    )
    c.wait_registered([1, 2, 3])
    c.wait_controller()
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("orders", 2, 3)])["orders"].result(60)
    for p in (0, 1):
        c.wait_isr("orders", p, 3)
    prod = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(200):
        prod.produce("orders", f"m{i}".encode())
    assert prod.flush(60) == 0
    assert sorted(read_all(c.bootstrap, "orders", 200)) == sorted(f"m{i}".encode() for i in range(200))
    create_scram_user(c.bootstrap, "alice", "alice-secret")

    identity = Id("x509", "CN=kafka-broker,O=kafkad-tests")
    assert assert_secured(c.zk.client, identity) > 30

    # the plain port: a session without a certificate, hence without an identity
    with ZkView(f"{tls_zk.connect_string}{c.chroot}") as anon:
        assert_locked_out(anon.client, "orders", "alice")
    assert_clean_logs(c.brokers)

    # the migration tool over TLS (--zk-tls-config-file, the brokers' certificate): open, then secure again
    tls_file = tmp_path / "zk-tls.properties"
    tls_file.write_text("".join(f"{k}={v}\n" for k, v in _tls_keys(pem, pki.ca).items()))
    for mode in ("unsecure", "secure"):
        mark = marker_zxid(c.zk.client)
        r = run_migration(c.zookeeper_connect, mode, "--zk-tls-config-file", str(tls_file))
        assert r.returncode == 0, r.stderr + r.stdout
        if mode == "unsecure":
            assert assert_open(c.zk.client, created_before=mark) > 30
        else:
            assert assert_secured(c.zk.client, identity, created_before=mark) > 30


def _lone_broker(tmp_path: Path, zk: ZooKeeperServer, name: str, keys: dict[str, str]) -> BrokerProcess:
    return BrokerProcess(
        tmp_path / name,
        {
            "zookeeper.connect": f"{zk.secure_connect_string}/kafkad-{uuid.uuid4().hex[:8]}",
            "broker.id": "1",
            "zookeeper.connection.timeout.ms": "4000",
            "zookeeper.set.acl": "true",
            **keys,
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


def test_untrusted_certificates_stop_the_broker_naming_the_setting(
    tls_zk: ZooKeeperServer, pki: Pki, tmp_path: Path
) -> None:
    pki.other_ca("rogue-ca")
    rogue, _, _ = _client_pem(pki, "rogue-broker", ca="rogue-ca")
    code, log = _start_fails(_lone_broker(tmp_path, tls_zk, "rogue-cert", _tls_keys(rogue, pki.ca)))
    assert code != 0
    assert f"TLS to ZooKeeper at {tls_zk.secure_connect_string} failed" in log, log
    assert "refused this broker's certificate: check zookeeper.ssl.keystore.location" in log, log
    assert " started: " not in log, log

    # our trust store lacks ZooKeeper's CA: the broker refuses ZooKeeper's certificate
    good, _, _ = _client_pem(pki, "kafka-broker")
    wrong_trust = pki.dir / "rogue-ca.crt"
    code, log = _start_fails(_lone_broker(tmp_path, tls_zk, "wrong-trust", _tls_keys(good, wrong_trust)))
    assert code != 0
    assert "CERTIFICATE_VERIFY_FAILED" in log, log
    assert "certificate is not trusted: check zookeeper.ssl.truststore.location" in log, log

    # a key store that is not PEM key material: a configuration error naming the key, exit 2
    code, log = _start_fails(_lone_broker(tmp_path, tls_zk, "bad-keystore", _tls_keys(pki.ca, pki.ca)))
    assert code == 2 and "zookeeper.ssl.keystore.location: cannot load the PEM key store" in log, log
