"""Issue 23 item 4: real clients pinned to old protocol ends against kafkad.

kafka-python with api_version (0, 9), (0, 10, 0) (message format v0/v1: Produce v1/v2 up-converted,
Fetch v1/v2 down-converted, item 2), (1, 0, 0) and (2, 1, 0), and aiokafka at 1.0.0 and 2.1.0, produce,
consume in a group and read their committed offsets; kafka-python at (0, 10, 0) also reads the log's ends
through ListOffsets v0 and commits/fetches offsets (OffsetCommit v2, OffsetFetch v1), what Burrow-era
tools send. Each test checks the broker's log holds no ERROR and no 'unsupported api' line."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]
from kafka.structs import OffsetAndMetadata  # type: ignore[import-untyped]

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import create_topics

pytestmark = pytest.mark.integration

N = 20
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("kafkad-old-clients")) as b:
        yield b
        log = b.log_text()
        assert "ERROR" not in log and "Traceback" not in log
        assert "unsupported api" not in log, log


@pytest.mark.parametrize(
    "version", [(0, 9), (0, 10, 0), (1, 0, 0), (2, 1, 0)], ids=["0.9", "0.10.0", "1.0", "2.1"]
)
def test_kafka_python_old_api_versions(broker: BrokerProcess, version: tuple[int, int, int]) -> None:
    tag = "".join(map(str, version))
    topic, group = f"kp-old-{tag}", f"kp-group-{tag}"
    create_topics(broker.bootstrap, {topic: 1})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=version)
    for i in range(N):
        producer.send(topic, value=b"v%d" % i)
    producer.flush(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        api_version=version,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < N and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    assert got == [b"v%d" % i for i in range(N)]
    consumer.commit()
    tp = TopicPartition(topic, 0)
    assert consumer.committed(tp) == N
    assert consumer.end_offsets([tp]) == {tp: N}
    consumer.close()


def test_kafka_python_0_10_0_offsets(broker: BrokerProcess) -> None:
    """kafka-python at (0, 10, 0): ListOffsets v0 (old_style_offsets), OffsetCommit v2, OffsetFetch v1."""
    topic = "kp-old-010"
    create_topics(broker.bootstrap, {topic: 1})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(2, 1, 0))
    for i in range(5):
        producer.send(topic, value=b"x%d" % i)
    producer.flush(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, api_version=(0, 10, 0), group_id="kp-group-010"
    )
    tp = TopicPartition(topic, 0)
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 5}
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(3, "")})
    assert consumer.committed(tp) == 3
    consumer.close()


@pytest.mark.parametrize("version", ["1.0.0", "2.1.0"])
def test_aiokafka_old_api_versions(broker: BrokerProcess, version: str) -> None:
    topic, group = f"aio-old-{version}", f"aio-group-{version}"
    create_topics(broker.bootstrap, {topic: 1})

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, api_version=version)
        await producer.start()
        try:
            for i in range(N):
                await producer.send_and_wait(topic, b"a%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            api_version=version,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(DEADLINE_S):
                while len(got) < N:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        got.extend(r.value for r in records)
            assert got == [b"a%d" % i for i in range(N)]
            await consumer.commit()
            from aiokafka import TopicPartition as ATP  # type: ignore[import-untyped]

            assert await consumer.committed(ATP(topic, 0)) == N
        finally:
            await consumer.stop()

    asyncio.run(go())
