"""Real clients reacting to UNKNOWN_TOPIC_OR_PARTITION as they do with Kafka (issue 15 item 1): a consumer
subscribed to a topic that does not exist yet reports it and starts reading once the topic is created; a
producer to a missing topic on a broker that does not auto-create fails its records with that error
rather than hanging."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import Rec, create_topics, produce_confluent

pytestmark = pytest.mark.integration


@pytest.fixture()
def no_auto_create(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "kafkad", {"auto.create.topics.enable": "false"}) as b:
        yield b


def test_consumer_waits_for_a_missing_topic_then_reads_it(no_auto_create: BrokerProcess) -> None:
    from confluent_kafka import Consumer, KafkaError

    bootstrap = no_auto_create.bootstrap
    topic = f"later-{uuid.uuid4().hex[:8]}"
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    try:
        c.subscribe([topic])
        seen_unknown = False
        deadline = time.monotonic() + 30
        while not seen_unknown and time.monotonic() < deadline:
            m = c.poll(0.2)
            err = m.error() if m is not None else None
            if err is not None:
                seen_unknown = err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)
        assert seen_unknown, "the consumer never reported the missing topic"
        create_topics(bootstrap, {topic: 1})
        produce_confluent(bootstrap, topic, [Rec(0, None, b"hello", (), 0)])
        got = None
        deadline = time.monotonic() + 60
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got = m.value()
        assert got == b"hello"
    finally:
        c.close()


def test_producer_to_a_missing_topic_fails_with_unknown_topic(no_auto_create: BrokerProcess) -> None:
    from confluent_kafka import KafkaError, Producer

    # librdkafka gives a missing topic topic.metadata.propagation.max.ms to appear, then fails its records
    p = Producer(
        {
            "bootstrap.servers": no_auto_create.bootstrap,
            "message.timeout.ms": 20000,
            "topic.metadata.propagation.max.ms": 1000,
        }
    )
    errors: list[int] = []

    def delivered(err: object, _msg: object) -> None:
        errors.append(err.code() if err is not None else 0)  # type: ignore[attr-defined]

    start = time.monotonic()
    p.produce(f"nowhere-{uuid.uuid4().hex[:8]}", b"x", on_delivery=delivered)
    assert p.flush(30) == 0
    assert errors and errors[0] in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC), errors
    assert time.monotonic() - start < 15, "failed by the message timeout, not by the unknown topic"


def test_kafka_python_producer_to_a_missing_topic_raises(no_auto_create: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError, UnknownTopicOrPartitionError

    p = KafkaProducer(bootstrap_servers=no_auto_create.bootstrap, max_block_ms=3000)
    try:
        with pytest.raises((KafkaTimeoutError, UnknownTopicOrPartitionError)):
            p.send(f"nowhere-{uuid.uuid4().hex[:8]}", b"x").get(timeout=10)
    finally:
        p.close(timeout=5)
