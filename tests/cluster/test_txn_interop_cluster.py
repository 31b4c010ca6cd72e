"""Transactions across client stacks on the 3-broker cluster (RF 3, min.insync.replicas 2, the transaction
and offsets topics RF 3): as test_txn_interop.py, the transactional producers of confluent-kafka,
kafka-python, aiokafka and kafkajs commit, abort and commit again with consumer offsets inside, and
read_committed consumers of every stack read exactly the committed records. The coordinators and the
partition leaders are spread over the brokers, so markers travel between them. Needs txn-log and txn-coord."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration.txn_interop import SOURCE, STACKS, check_stack, clean, ensure_topic

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

OVERRIDES = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "5",
}


def test_transactions_interop_cluster(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, overrides=OVERRIDES)
    c.wait_registered([1, 2, 3], timeout_s=60)
    c.wait_controller(timeout_s=60)
    ensure_topic(c.bootstrap, SOURCE, 1, 3)
    reports = {
        p: check_stack(c.bootstrap, p, lambda name, n: ensure_topic(c.bootstrap, name, n, 3)) for p in STACKS
    }
    assert all(clean(r) for r in reports.values()), reports
