"""CreatePartitions in cluster mode answers once the new partitions have leaders (issue 24 item 7): an
admin client with a 10 s request timeout got no answer in most tries although the partitions had leaders
within half a second (the wait missed a state znode created between its read and its exists watch).
Several growths in a row with an operation timeout (the broker waits for the leaders, as Kafka's
DelayedCreatePartitions) and without one (Kafka answers at once), each answered within the client's
timeout."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]

from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

TRIES = 20


def test_create_partitions_answers_within_the_request_timeout(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(zk_server.connect_string, 3)
    c.wait_registered([1, 2, 3], timeout_s=30)
    c.wait_controller(timeout_s=30)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    for rf, topic in ((1, "grow-rf1"), (3, "grow-rf3")):
        (fut,) = admin.create_topics([NewTopic(topic, 1, rf)], request_timeout=30).values()
        fut.result(60)
        c.wait_until(lambda t=topic: c.leader_of(t, 0), 30, f"{topic}-0 led")  # type: ignore[misc]
        for i in range(TRIES):
            count = 2 + i
            (fut,) = admin.create_partitions(
                [NewPartitions(topic, count)], request_timeout=10, operation_timeout=9
            ).values()
            fut.result(60)  # librdkafka fails the future with _TIMED_OUT past its 10 s request timeout
            for p in range(count):  # answered once led
                assert c.leader_of(topic, p) is not None, (topic, p)
        count = 2 + TRIES
        (fut,) = admin.create_partitions([NewPartitions(topic, count)], request_timeout=10).values()
        fut.result(60)
        c.wait_until(lambda t=topic, n=count: c.leader_of(t, n - 1), 30, f"{topic}-{count - 1} led")  # type: ignore[misc]
    for bid in c.ids:
        log = c.broker(bid).log_text(since_start=False)
        assert "ERROR" not in log and "Traceback" not in log, log[-3000:]
