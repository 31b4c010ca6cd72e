"""The ACL matrix with real clients (confluent-kafka) and kafkad-acls: a user with only READ on one topic
cannot write it, cannot see other topics in Metadata, cannot commit for a group it may not use; a
prefixed ACL covers new topics; super users can do anything; ANONYMOUS on PLAINTEXT sees nothing; the
ACLs survive a restart; removing an ACL revokes it."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkad.protocol import ErrorCode
from tests.integration.broker_process import BrokerProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

Conf = dict[str, str | int | float | bool]  # what confluent_kafka's AdminClient takes
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)


class Acl:
    def __init__(self, base: Path) -> None:
        self.sasl_port = free_port()
        self.broker = BrokerProcess(
            base / "kafkad",
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{{port}},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:admin",
                "num.partitions": "1",
            },
        )
        self.broker.overrides["listeners"] = self.broker.overrides["listeners"].replace(
            "{port}", str(self.broker.port)
        )
        self.broker.start()
        self.admin_props = base / "admin.properties"
        self.admin_props.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";\n'
        )

    def conf(self, user: str, **extra: str) -> Conf:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": USERS[user],
            **extra,
        }

    def acls(self, *args: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "kafkad.tools.acls", "--bootstrap-server", f"127.0.0.1:{self.sasl_port}",
             "--command-config", str(self.admin_props), *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr + r.stdout
        return r.stdout


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Acl]:
    e = Acl(tmp_path_factory.mktemp("acls"))
    try:
        admin = AdminClient(e.conf("admin"))
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("orders", "secret")]).values():
            f.result(30)
        p = ck.Producer(e.conf("admin"))
        for i in range(5):
            p.produce("orders", f"o{i}".encode())
        assert p.flush(30) == 0
        e.acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
        e.acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "g-alice")
        e.acls("--add", "--allow-principal", "User:bob", "--producer", "--topic", "logs-",
               "--resource-pattern-type", "prefixed")  # fmt: skip
        yield e
    finally:
        e.broker.stop()


def produce_error(conf: Conf, topic: str) -> ck.KafkaError | None:
    errors: list[ck.KafkaError] = []
    p = ck.Producer({**conf, "message.timeout.ms": 10000, "retries": 0})
    p.produce(topic, b"x", on_delivery=lambda e, _m: errors.append(e) if e else None)
    p.flush(30)
    return errors[0] if errors else None


def test_read_only_user(env: Acl) -> None:
    alice = env.conf("alice")
    err = produce_error(alice, "orders")
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    topics = AdminClient(alice).list_topics(timeout=30).topics
    assert set(topics) == {"orders"}, topics  # no "secret", no __consumer_offsets
    c = ck.Consumer(
        {**alice, "group.id": "g-alice", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    c.subscribe(["orders"])
    got: list[bytes | None] = []
    deadline = time.monotonic() + 60
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    assert len(got) == 5
    c.commit(asynchronous=False)
    c.close()
    # Committing for a group alice may not use: GROUP_AUTHORIZATION_FAILED (OffsetCommit and FindCoordinator).
    from kafkad.tools.client import KafkaClient
    from kafkad.tools.client_security import ClientSecurity

    sec = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": USERS["alice"],
        }
    )
    with KafkaClient(f"127.0.0.1:{env.sasl_port}", security=sec) as client:
        commit = {
            "group_id": "g-other", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}],
        }  # fmt: skip
        resp = client.send(8, commit)
        assert resp["topics"][0]["partitions"][0]["error_code"] == 30
        assert client.send(10, {"key": "g-other", "key_type": 0})["error_code"] == 30
        commit["group_id"] = "g-alice"
        commit["topics"] = [
            {
                "name": "secret",
                "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}],
            }
        ]
        resp = client.send(8, commit)
        assert resp["topics"][0]["partitions"][0]["error_code"] == 29  # READ on the group, not on the topic
        fetch = {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}
                       for t in ("secret", "orders")],
        }  # fmt: skip
        codes = {r["topic"]: r["partitions"][0]["error_code"] for r in client.send(1, fetch)["responses"]}
        assert codes == {"secret": 29, "orders": 0}


def test_newer_request_forms_are_authorized_per_topic_and_group(env: Acl) -> None:
    """Issue 23: topics named by id (Fetch v13, Metadata v12, DeleteTopics v6), batched groups (OffsetFetch
    v8) and batched coordinator keys (FindCoordinator v4) get the same per-topic / per-group checks."""
    from uuid import UUID

    from kafkad.tools.client import KafkaClient
    from kafkad.tools.client_security import ClientSecurity

    def sec(user: str) -> ClientSecurity:
        return ClientSecurity.from_properties(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": user,
                "sasl.password": USERS[user],
            }
        )

    bootstrap = f"127.0.0.1:{env.sasl_port}"
    with KafkaClient(bootstrap, security=sec("admin")) as admin:
        md = admin.conn.send(3, {"topics": None, "allow_auto_topic_creation": False}, version=12)
        ids = {t["name"]: t["topic_id"] for t in md["topics"]}
    assert ids["orders"].int != 0 and ids["secret"].int != 0
    with KafkaClient(bootstrap, security=sec("alice")) as client:
        send = client.conn.send
        fetch = {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "session_epoch": -1,
            "topics": [{"topic_id": ids[t], "partitions": [{"partition": 0, "fetch_offset": 0,
                                                             "partition_max_bytes": 1 << 20}]}
                       for t in ("secret", "orders")],
        }  # fmt: skip
        got = {
            r["topic_id"]: r["partitions"][0]["error_code"] for r in send(1, fetch, version=13)["responses"]
        }
        assert got == {ids["secret"]: 29, ids["orders"]: 0}
        by_id = [{"name": None, "topic_id": ids[t]} for t in ("secret", "orders")]
        md = send(3, {"topics": by_id, "allow_auto_topic_creation": False}, version=12)
        assert {t["name"]: t["error_code"] for t in md["topics"]} == {"secret": 29, "orders": 0}
        unknown = send(3, {"topics": [{"name": None, "topic_id": UUID(int=7)}]}, version=12)["topics"][0]
        assert unknown["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        groups = [
            {"group_id": "g-other", "topics": None},
            {
                "group_id": "g-alice",
                "topics": [{"name": t, "partition_indexes": [0]} for t in ("secret", "orders")],
            },
        ]
        out = {g["group_id"]: g for g in send(9, {"groups": groups}, version=8)["groups"]}
        assert out["g-other"]["error_code"] == 30
        codes = {t["name"]: t["partitions"][0]["error_code"] for t in out["g-alice"]["topics"]}
        assert out["g-alice"]["error_code"] == 0 and codes == {"secret": 29, "orders": 0}
        keys = send(10, {"key_type": 0, "coordinator_keys": ["g-alice", "g-other"]}, version=4)[
            "coordinators"
        ]
        assert {c["key"]: c["error_code"] for c in keys} == {"g-alice": 0, "g-other": 30}
        deleted = send(
            20, {"topics": [{"name": None, "topic_id": ids["secret"]}], "timeout_ms": 5000}, version=6
        )
        assert [(r["name"], r["error_code"]) for r in deleted["responses"]] == [("secret", 29)]
    with KafkaClient(bootstrap, security=sec("admin")) as admin:
        assert "secret" in admin.metadata(["secret"]).topics


def test_describe_cluster_open_to_every_principal(env: Acl) -> None:
    """Kafka's broker checks no ACL for DescribeCluster (AdminClient.describeCluster of any user works);
    the authorized operations DescribeCluster, Metadata and DescribeGroups report are the principal's own."""
    from kafkad.tools.client import KafkaClient
    from kafkad.tools.client_security import ClientSecurity

    def describe(user: str) -> dict[str, object]:
        sec = _sec(user)
        with KafkaClient(f"127.0.0.1:{env.sasl_port}", security=sec) as client:
            return dict(client.send(60, {"include_cluster_authorized_operations": True}))

    def _sec(user: str) -> ClientSecurity:
        return ClientSecurity.from_properties(
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": user, "sasl.password": USERS[user]}
        )  # fmt: skip

    read_describe = (1 << 3) | (1 << 8)  # READ, DESCRIBE: alice's ACLs on "orders" and g-alice
    with KafkaClient(f"127.0.0.1:{env.sasl_port}", security=_sec("alice")) as client:
        md = client.conn.send(
            3,
            {"topics": [{"name": "orders"}], "allow_auto_topic_creation": False,
             "include_cluster_authorized_operations": True, "include_topic_authorized_operations": True},
            version=8,
        )  # fmt: skip
        assert md["topics"][0]["topic_authorized_operations"] == read_describe, md
        assert md["cluster_authorized_operations"] == 0, md
        dg = client.conn.send(15, {"groups": ["g-alice"], "include_authorized_operations": True}, version=3)
        assert dg["groups"][0]["authorized_operations"] == read_describe, dg
    alice = describe("alice")
    assert alice["error_code"] == 0 and alice["cluster_authorized_operations"] == 0, alice
    assert len(alice["brokers"]) == 1  # type: ignore[arg-type]
    admin = describe("admin")
    assert admin["error_code"] == 0 and admin["cluster_authorized_operations"] == sum(
        1 << op for op in (5, 7, 8, 9, 10, 11, 12)
    ), admin


def test_prefixed_acl_covers_new_topics(env: Acl) -> None:
    bob = env.conf("bob")
    topic = f"logs-{uuid.uuid4().hex[:6]}"
    assert produce_error(bob, topic) is None  # auto-created: CREATE on the prefix
    err = produce_error(bob, "orders")
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_super_user_and_anonymous(env: Acl) -> None:
    admin = AdminClient(env.conf("admin"))
    name = f"adm-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    admin.delete_topics([name])[name].result(30)
    anon: Conf = {"bootstrap.servers": env.broker.bootstrap}
    assert AdminClient(anon).list_topics(timeout=30).topics == {}
    err = produce_error(anon, "orders")
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    alice = AdminClient(env.conf("alice"))  # referenced until the future is done
    with pytest.raises(ck.KafkaException) as e:
        alice.create_topics([NewTopic("nope", 1, 1)])["nope"].result(30)
    assert e.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acls_listed_removed_and_persisted(env: Acl) -> None:
    out = env.acls("--list", "--topic", "orders")
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in out
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out
    env.broker.restart()
    assert "operation=WRITE" in env.acls("--list", "--principal", "User:bob")
    env.acls("--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "secret")
    assert "secret" in AdminClient(env.conf("alice")).list_topics(timeout=30).topics
    removed = env.acls(
        "--remove",
        "--force",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Describe",
        "--topic",
        "secret",
    )
    assert "secret" in removed
    assert "secret" not in AdminClient(env.conf("alice")).list_topics(timeout=30).topics
