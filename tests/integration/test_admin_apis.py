"""The admin APIs of issue 15 against real clients: confluent-kafka's AdminClient, kafka-python's admin
client and kcat.

IncrementalAlterConfigs (44), OffsetDelete (47), ListGroups v4-v5 filters, ListOffsets max timestamp
(KIP-734), DescribeCluster (60), ElectLeaders (43), Alter/ListPartitionReassignments (45/46) standalone,
and authorized operations in Metadata, DescribeCluster and DescribeGroups (the full sets: no authorizer).
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import Rec, create_topics, kcat_path, produce_confluent
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPS = {
    "CREATE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE"}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture()
def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture()
def kp_admin(bootstrap: str) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        yield a
    finally:
        a.close()


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


# --- ListOffsets -----------------------------------------------------------------------------------


def test_list_offsets_max_timestamp_earliest_latest(bootstrap: str, admin: Any) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    topic = _name("lo")
    create_topics(bootstrap, {topic: 1})
    # one record per batch so the batch with the max timestamp starts at that record
    for ts in (1_000, 5_000, 3_000):
        produce_confluent(bootstrap, topic, [Rec(0, None, b"v", (), ts)])
    tp = TopicPartition(topic, 0)
    specs = {
        "max": OffsetSpec.max_timestamp(),  # type: ignore[no-untyped-call]
        "earliest": OffsetSpec.earliest(),  # type: ignore[no-untyped-call]
        "latest": OffsetSpec.latest(),  # type: ignore[no-untyped-call]
        "at 2000": OffsetSpec.for_timestamp(2_000),
    }
    got = {}
    for name, spec in specs.items():
        (fut,) = admin.list_offsets({tp: spec}).values()
        r = fut.result(30)
        got[name] = (r.offset, r.timestamp)
    assert got["max"] == (1, 5_000), got
    # librdkafka also sends -3 below v7: every version answers it
    for version in (1, 5, 8):
        raw = Raw(int(bootstrap.rsplit(":", 1)[1]))
        try:
            body = {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -3, "current_leader_epoch": -1}]}
            ]}  # fmt: skip
            (p,) = raw.call(2, version, body)["topics"][0]["partitions"]
        finally:
            raw.close()
        assert (p["error_code"], p["offset"], p["timestamp"]) == (0, 1, 5_000), (version, p)
    assert got["earliest"][0] == 0 and got["latest"][0] == 3, got
    assert got["at 2000"] == (1, 5_000), got


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_list_offsets_max_timestamp_answers_the_record_not_its_batch(
    bootstrap: str, admin: Any, compression: str
) -> None:
    """Kafka 3.8+ answers -3 with the offset of the record holding the max timestamp; records produced in
    one batch (linger) must not answer the batch's first offset."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    topic = _name("lo-batch")
    create_topics(bootstrap, {topic: 1})
    recs = [Rec(0, None, b"v", (), ts) for ts in (1_000, 2_000, 7_000, 3_000, 7_000)]
    produce_confluent(bootstrap, topic, recs, {"linger.ms": 500, "compression.type": compression})
    tp = TopicPartition(topic, 0)
    (fut,) = admin.list_offsets({tp: OffsetSpec.max_timestamp()}).values()  # type: ignore[no-untyped-call]
    r = fut.result(30)
    assert (r.offset, r.timestamp) == (2, 7_000)  # the batch's own first offset would be 0


def test_kcat_queries_offsets_by_timestamp(bootstrap: str) -> None:
    topic = _name("lo-kcat")
    create_topics(bootstrap, {topic: 1})
    for ts in (1_000, 5_000, 3_000):
        produce_confluent(bootstrap, topic, [Rec(0, None, b"v", (), ts)])
    out = subprocess.run(
        [kcat_path(), "-Q", "-b", bootstrap, "-t", f"{topic}:0:2500"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "offset 1" in out.stdout.decode(), out.stdout


# --- DescribeCluster, authorized operations ----------------------------------------------------------


def test_describe_cluster_with_authorized_operations(
    session_broker: BrokerProcess, admin: Any, kp_admin: Any
) -> None:
    d = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert d.controller.id == 0
    assert [(n.id, n.host, n.port) for n in d.nodes] == [(0, "127.0.0.1", session_broker.port)]
    assert {op.name for op in d.authorized_operations} == CLUSTER_OPS
    assert admin.describe_cluster().result(30).authorized_operations is None
    k = kp_admin.describe_cluster()
    assert k["controller_id"] == 0 and k["brokers"][0]["port"] == session_broker.port, k
    assert set(k["authorized_operations"]) == CLUSTER_OPS, k


def test_topic_and_group_authorized_operations(bootstrap: str, admin: Any) -> None:
    from confluent_kafka import TopicCollection

    topic, group = _name("ops"), _name("ops-g")
    create_topics(bootstrap, {topic: 1})
    _commit(bootstrap, group, topic, 0)
    (fut,) = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True).values()
    assert {op.name for op in fut.result(30).authorized_operations} == TOPIC_OPS
    (gfut,) = admin.describe_consumer_groups([group], include_authorized_operations=True).values()
    assert {op.name for op in gfut.result(30).authorized_operations} == GROUP_OPS


# --- ListGroups v4/v5 ----------------------------------------------------------------------------------


def test_list_consumer_groups_by_state_and_type(bootstrap: str, admin: Any, kp_admin: Any) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    topic, group = _name("lg"), _name("lg-g")
    create_topics(bootstrap, {topic: 1})
    _commit(bootstrap, group, topic, 0)
    empty = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(30)
    mine = [g for g in empty.valid if g.group_id == group]
    assert len(mine) == 1 and mine[0].state == ConsumerGroupState.EMPTY, empty.valid
    assert mine[0].type == ConsumerGroupType.CLASSIC
    stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(30)
    assert group not in {g.group_id for g in stable.valid}
    listed = kp_admin.list_groups(states_filter=["empty"], types_filter=["classic"])
    assert any(g["group_id"] == group and g["group_state"] == "Empty" for g in listed), listed
    assert not kp_admin.list_groups(types_filter=["consumer"])


# --- IncrementalAlterConfigs ---------------------------------------------------------------------------


def test_incremental_alter_topic_configs(bootstrap: str, admin: Any) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    topic = _name("iac")
    create_topics(bootstrap, {topic: 1}, {topic: {"segment.ms": "600000"}})

    def alter(*entries: tuple[str, str | None, AlterConfigOpType]) -> None:
        res = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries],
        )
        for fut in admin.incremental_alter_configs([res]).values():
            fut.result(30)

    def described() -> dict[str, str]:
        (fut,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
        return {k: e.value for k, e in fut.result(30).items()}

    alter(
        ("retention.ms", "123456", AlterConfigOpType.SET),
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
    )
    got = described()
    assert got["retention.ms"] == "123456" and got["cleanup.policy"] == "delete,compact", got
    assert got["segment.ms"] == "600000", "keys not named must keep their overrides"
    alter(
        ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
        ("segment.ms", None, AlterConfigOpType.DELETE),
    )
    got = described()
    assert got["cleanup.policy"] == "compact" and got["segment.ms"] == "604800000", got
    # errors name the key, leave the topic untouched
    bad = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )
    (fut,) = admin.incremental_alter_configs([bad]).values()
    with pytest.raises(Exception, match=r"retention\.ms"):
        fut.result(30)
    assert described()["retention.ms"] == "123456"


# --- AlterUserScramCredentials: a body followed by extra bytes -------------------------------------------


def test_alter_user_scram_credentials_with_librdkafka(admin: Any) -> None:
    """librdkafka writes the request's tag buffer twice (one byte after the body). Kafka's parser reads
    the body and ignores what follows it; kafkad closed the connection, so the call timed out."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    user = _name("scram-user")
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    upsert = UserScramCredentialUpsertion(user, info, b"secret-password")
    for fut in admin.alter_user_scram_credentials([upsert], request_timeout=20).values():
        assert fut.result(30) is None
    described = admin.describe_user_scram_credentials([user], request_timeout=20)[user].result(30)
    (cred,) = described.scram_credential_infos
    assert (cred.mechanism, cred.iterations) == (ScramMechanism.SCRAM_SHA_256, 8192)
    delete = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
    for fut in admin.alter_user_scram_credentials([delete], request_timeout=20).values():
        assert fut.result(30) is None


# --- OffsetDelete -------------------------------------------------------------------------------------


def test_delete_group_offsets_of_an_empty_group(bootstrap: str, kp_admin: Any) -> None:
    from kafka import TopicPartition

    topic, group = _name("od"), _name("od-g")
    create_topics(bootstrap, {topic: 2})
    _commit(bootstrap, group, topic, 1)
    from kafka.errors import NoError

    before = kp_admin.list_group_offsets(group)[group]
    assert TopicPartition(topic, 0) in before, before
    result = kp_admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
    assert result == {TopicPartition(topic, 0): NoError}, result
    after = kp_admin.list_group_offsets(group)[group]
    assert TopicPartition(topic, 0) not in after, after


def _offset_delete(port: int, group: str, topics: dict[str, list[int]]) -> dict[str, Any]:
    raw = Raw(port)
    try:
        return raw.call(
            47,
            0,
            {
                "group_id": group,
                "topics": [
                    {"name": t, "partitions": [{"partition_index": p} for p in ps]}
                    for t, ps in topics.items()
                ],
            },
        )
    finally:
        raw.close()


def test_offset_delete_refuses_topics_a_live_group_consumes(session_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = session_broker.bootstrap
    used, unused, group = _name("od-used"), _name("od-unused"), _name("od-live")
    create_topics(bootstrap, {used: 1, unused: 1})
    produce_confluent(bootstrap, used, [Rec(0, None, b"v", (), 0)])
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.subscribe([used])
        deadline = time.monotonic() + 60
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment(), "the consumer never joined"
        c.commit(offsets=[TopicPartition(used, 0, 1), TopicPartition(unused, 0, 0)], asynchronous=False)
        resp = _offset_delete(session_broker.port, group, {used: [0], unused: [0], "no-such-topic": [0]})
    finally:
        c.close()
    assert resp["error_code"] == 0, resp
    codes = {
        (t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]
    }
    assert codes == {(used, 0): 86, (unused, 0): 0, ("no-such-topic", 0): 3}, (
        codes
    )  # 86 GROUP_SUBSCRIBED_TO_TOPIC
    assert (
        _offset_delete(session_broker.port, _name("nobody"), {used: [0]})["error_code"] == 69
    )  # GROUP_ID_NOT_FOUND


# --- ElectLeaders, reassignments (standalone) ---------------------------------------------------------


def test_elect_leaders_standalone_is_not_needed(bootstrap: str, admin: Any, kp_admin: Any) -> None:
    from confluent_kafka import ElectionType, TopicPartition

    topic = _name("el")
    create_topics(bootstrap, {topic: 2})
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    (err,) = result.values()
    assert err is not None and err.code() == 84, result  # ELECTION_NOT_NEEDED
    unknown = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 9)]).result(30)
    assert next(iter(unknown.values())).code() == 3, unknown  # UNKNOWN_TOPIC_OR_PARTITION
    # all partitions (null): Kafka leaves ELECTION_NOT_NEEDED out of the answer
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(30) == {}
    # kafka-python names every partition itself: each one is not needed
    resp = kp_admin.elect_leaders(0, None)
    codes = {p.error_code for r in resp.replica_election_results for p in r.partition_result}
    assert resp.error_code == 0 and codes == {84}, resp


def test_partition_reassignments_standalone(bootstrap: str, kp_admin: Any) -> None:
    from kafka import TopicPartition

    topic = _name("ra")
    create_topics(bootstrap, {topic: 1})
    tp = TopicPartition(topic, 0)
    assert kp_admin.list_partition_reassignments() == {}
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    alter = kp_admin.alter_partition_reassignments
    assert alter({tp: [0]}) == {tp: None}
    assert alter({tp: [0, 1]}) == {tp: InvalidReplicationAssignmentError}
    assert alter({tp: None}) == {tp: NoReassignmentInProgressError}
