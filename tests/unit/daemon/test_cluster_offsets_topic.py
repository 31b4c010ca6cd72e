"""FindCoordinator in cluster mode while too few brokers are known (Kafka's getOrCreateInternalTopic).

Chaos runs showed a broker whose metadata cache knew no live broker log "creating __consumer_offsets with
RF 0" on every client retry and ask for the topic each time. Kafka answers COORDINATOR_NOT_AVAILABLE while
alive brokers < offsets.topic.replication.factor without creating anything; kafkad says so once per count.
"""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from kafkad.cluster.zookeeper import ZooKeeperControlPlane
from kafkad.protocol import ErrorCode, KafkaError
from kafkad.replication.metadata_cache import BrokerInfo, Endpoint


class _Admin:
    def __init__(self) -> None:
        self.created: list[tuple[str, int, int]] = []

    async def create_topics(self, name: str, partitions: int, rf: int, *_a: Any) -> None:
        self.created.append((name, partitions, rf))


def _broker(rf: int, alive: int) -> tuple[Any, _Admin]:
    admin = _Admin()
    plane = ZooKeeperControlPlane(SimpleNamespace(zk=None, admin=admin, controller=None), 1)  # type: ignore[arg-type]
    cache = plane.cache
    brokers = [BrokerInfo(i, (Endpoint("127.0.0.1", 9000 + i, "PLAINTEXT", 0),)) for i in range(1, alive + 1)]
    cache.update(1, 1, brokers, [])
    group = SimpleNamespace(
        offsets_topic_replication_factor=rf,
        offsets_topic_num_partitions=5,
        offsets_topic_segment_bytes=1 << 20,
    )
    return SimpleNamespace(config=SimpleNamespace(group=group), control_plane=plane), admin


async def _ask(broker: Any, times: int) -> list[ErrorCode]:
    ctx = SimpleNamespace(broker=broker, listener="PLAINTEXT")
    codes = []
    for _ in range(times):
        with pytest.raises(KafkaError) as e:
            await broker.control_plane.find_coordinator(ctx, "group-a")
        codes.append(e.value.code)
    return codes


@pytest.mark.parametrize(("rf", "alive"), [(1, 0), (3, 0), (3, 2)])
def test_too_few_alive_brokers_answer_coordinator_not_available_and_create_nothing(
    rf: int, alive: int, caplog: pytest.LogCaptureFixture
) -> None:
    broker, admin = _broker(rf, alive)
    with caplog.at_level(logging.INFO, logger="kafkad.cluster.metadata"):
        codes = asyncio.run(_ask(broker, 5))
    assert codes == [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 5
    assert admin.created == []
    said = [r for r in caplog.records if "__consumer_offsets" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING, [r.getMessage() for r in said]


def test_enough_alive_brokers_create_the_topic_with_the_configured_rf() -> None:
    broker, admin = _broker(3, 3)
    assert asyncio.run(_ask(broker, 1)) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]  # being created
    assert admin.created == [("__consumer_offsets", 5, 3)]
