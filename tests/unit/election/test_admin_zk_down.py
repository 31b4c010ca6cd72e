"""Admin requests while ZooKeeper is unreachable: the retriable REQUEST_TIMED_OUT with a reason, not an
UNKNOWN_SERVER_ERROR that the dispatcher logs as a broker bug with a traceback (seen for CreateTopics
while ZooKeeper was down). ClusterAdmin on the fake ZooKeeper with its session gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkad.controller.admin import ClusterAdmin, ZkProducerIds
from kafkad.protocol import ErrorCode, KafkaError
from tests.unit.election.fake_zk import FakeZk


def _admin(zk: FakeZk) -> ClusterAdmin:
    return ClusterAdmin(
        zk,  # type: ignore[arg-type]
        1,
        validate_configs=lambda c: c,
        default_partitions=1,
        default_replication_factor=1,
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda a: a.create_topics("t", 3, 1, None, {}, False),
        lambda a: a.delete_topics(["t"]),
        lambda a: a.live_brokers(),
        lambda a: a.list_reassignments(None),
    ],
    ids=["create_topics", "delete_topics", "live_brokers", "list_reassignments"],
)
def test_requests_get_request_timed_out_while_zookeeper_is_down(call: Any) -> None:
    zk = FakeZk()
    zk.connected = False
    with pytest.raises(KafkaError) as raised:
        asyncio.run(call(_admin(zk)))
    assert raised.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert "ZooKeeper is unreachable" in (raised.value.message or "")


def test_producer_id_allocation_gets_request_timed_out_while_zookeeper_is_down() -> None:
    zk = FakeZk()
    zk.connected = False
    with pytest.raises(KafkaError) as raised:
        asyncio.run(ZkProducerIds(zk, 1).allocate())  # type: ignore[arg-type]
    assert raised.value.code == ErrorCode.REQUEST_TIMED_OUT
