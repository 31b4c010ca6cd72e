"""Transactional-id ACLs on the coordinator's APIs, as Kafka's KafkaApis checks them: WRITE on the id for
InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn / EndTxn, WRITE on each added topic, READ on the
group of AddOffsetsToTxn, DESCRIBE for DescribeTransactions and ListTransactions, CLUSTER_ACTION for the
brokers' AddPartitionsToTxn v4+, READ on each topic for DescribeProducers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkad.protocol import ErrorCode as E
from tests.integration.test_security_acls import USERS, Acl

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Acl]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    e = Acl(tmp_path_factory.mktemp("txn-acls"))
    try:
        admin = AdminClient(e.conf("admin"))
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("orders", "secret")]).values():
            f.result(30)
        e.acls("--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe",
               "--transactional-id", "tx-alice")  # fmt: skip
        e.acls("--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
        e.acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "g-alice")
        yield e
        e.broker.check_log()
    finally:
        e.broker.stop()


def _client(env: Acl, user: str) -> Any:
    from kafkad.tools.client import KafkaClient
    from kafkad.tools.client_security import ClientSecurity

    sec = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": USERS[user],
        }
    )
    return KafkaClient(f"127.0.0.1:{env.sasl_port}", security=sec)


def _add(send: Any, txn_id: str, pid: int, topics: list[str]) -> dict[str, int]:
    body = {
        "v3_and_below_transactional_id": txn_id,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": t, "partitions": [0]} for t in topics],
    }
    resp = send(24, body, version=3)
    return {
        t["name"]: t["results_by_partition"][0]["partition_error_code"]
        for t in resp["results_by_topic_v3_and_below"]
    }


def test_transactional_id_acls(env: Acl) -> None:
    with _client(env, "admin") as admin:
        assert admin.conn.send(10, {"key": "tx-other", "key_type": 1}, version=3)["error_code"] == 0
        other = admin.conn.send(
            22, {"transactional_id": "tx-other", "transaction_timeout_ms": 60000}, version=1
        )
        assert other["error_code"] == 0
    with _client(env, "alice") as client:
        send = client.conn.send
        assert send(10, {"key": "tx-alice", "key_type": 1}, version=3)["error_code"] == 0
        assert (
            send(10, {"key": "tx-other", "key_type": 1}, version=3)["error_code"]
            == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        denied = send(22, {"transactional_id": "tx-other", "transaction_timeout_ms": 60000}, version=1)
        assert denied["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        mine = send(22, {"transactional_id": "tx-alice", "transaction_timeout_ms": 60000}, version=1)
        assert mine["error_code"] == 0
        pid = mine["producer_id"]
        assert _add(send, "tx-alice", pid, ["orders", "secret"]) == {
            "orders": E.OPERATION_NOT_ATTEMPTED,
            "secret": E.TOPIC_AUTHORIZATION_FAILED,
        }
        assert _add(send, "tx-other", other["producer_id"], ["orders"]) == {
            "orders": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        }
        assert _add(send, "tx-alice", pid, ["orders"]) == {"orders": 0}
        brokers_form = {"transactions": [{"transactional_id": "tx-alice", "producer_id": pid, "producer_epoch": 0,
                                          "verify_only": True, "topics": [{"name": "orders", "partitions": [0]}]}]}  # fmt: skip
        assert send(24, brokers_form, version=4)["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED
        offsets = {"transactional_id": "tx-alice", "producer_id": pid, "producer_epoch": 0}
        assert (
            send(25, {**offsets, "group_id": "g-other"}, version=2)["error_code"]
            == E.GROUP_AUTHORIZATION_FAILED
        )
        assert send(25, {**offsets, "group_id": "g-alice"}, version=2)["error_code"] == 0
        end_other = {"transactional_id": "tx-other", "producer_id": other["producer_id"], "producer_epoch": 0}
        assert (
            send(26, {**end_other, "committed": False}, version=2)["error_code"]
            == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        described = send(65, {"transactional_ids": ["tx-alice", "tx-other"]}, version=0)["transaction_states"]
        assert {d["transactional_id"]: d["error_code"] for d in described} == {
            "tx-alice": 0,
            "tx-other": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        }
        listed = send(66, {"state_filters": [], "producer_id_filters": []}, version=0)["transaction_states"]
        assert [t["transactional_id"] for t in listed] == ["tx-alice"]
        # alice may WRITE orders but READ neither topic: DescribeProducers answers each partition denied
        topics = [{"name": n, "partition_indexes": [0]} for n in ("orders", "secret")]
        producers = send(61, {"topics": topics}, version=0)["topics"]
        assert [(t["name"], [p["error_code"] for p in t["partitions"]]) for t in producers] == [
            ("orders", [E.TOPIC_AUTHORIZATION_FAILED]),
            ("secret", [E.TOPIC_AUTHORIZATION_FAILED]),
        ]
    with _client(env, "admin") as admin:
        listed = admin.conn.send(66, {"state_filters": [], "producer_id_filters": []}, version=0)
        assert {t["transactional_id"] for t in listed["transaction_states"]} == {"tx-alice", "tx-other"}
        producers = admin.conn.send(61, {"topics": [{"name": "orders", "partition_indexes": [0]}]}, version=0)
        assert [p["error_code"] for p in producers["topics"][0]["partitions"]] == [0]
