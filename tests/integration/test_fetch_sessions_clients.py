"""Real consumers against a real kafkad with fetch sessions (KIP-227): kafka-python's consumer opens a
session and fetches incrementally (its FetchSessionHandler, as the Java client's), librdkafka fetches
sessionless (session 0, epoch -1); both read every record exactly once, in order, while only some
partitions change between fetches (an incremental response leaves the unchanged ones out)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.integration.clients import Rec, create_topics, produce_confluent

PARTITIONS = 4
ROUNDS = 6
PER_ROUND = 5


def _produce_round(bootstrap: str, topic: str, r: int) -> None:
    # each round writes to one partition only: the others are unchanged in the next fetches
    recs = [Rec(r % PARTITIONS, f"k{r}-{i}".encode(), f"r{r}-{i}".encode(), (), 0) for i in range(PER_ROUND)]
    produce_confluent(bootstrap, topic, recs)


def _poll_kafka_python(c: Any, want: int, limit_s: float) -> list[tuple[int, int, bytes]]:
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + limit_s
    while len(got) < want and time.monotonic() < deadline:
        for tp, msgs in c.poll(timeout_ms=200).items():
            got.extend((tp.partition, m.offset, m.value) for m in msgs)
    return got


def test_kafka_python_consumer_reads_through_an_incremental_session(bootstrap: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = f"sess-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, {topic: PARTITIONS})
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got: list[tuple[int, int, bytes]] = []
        for r in range(ROUNDS):
            _produce_round(bootstrap, topic, r)
            got += _poll_kafka_python(c, PER_ROUND, 30.0)
            assert len(got) == (r + 1) * PER_ROUND, got
        handlers = list(c._fetcher._session_handlers.values())
        assert handlers, "no fetch was made"
        meta = handlers[0].next_metadata
        # an open session, several incremental epochs in (a sessionless broker leaves it at id 0, epoch 0)
        assert meta.session_id != 0 and meta.epoch > 2, meta
    finally:
        c.close()
    by_partition: dict[int, list[tuple[int, bytes]]] = {}
    for p, offset, value in got:
        by_partition.setdefault(p, []).append((offset, value))
    expected: dict[int, list[bytes]] = {}
    for r in range(ROUNDS):
        expected.setdefault(r % PARTITIONS, []).extend(f"r{r}-{i}".encode() for i in range(PER_ROUND))
    for p, values in expected.items():
        offsets = [o for o, _ in by_partition[p]]
        assert offsets == list(range(len(values))) and [v for _, v in by_partition[p]] == values


def test_confluent_consumer_reads_sessionless_beside_a_session(bootstrap: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    topic = f"sess-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, {topic: PARTITIONS})
    k = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "fetch.wait.max.ms": 100}
    )
    try:
        k.assign([KTopicPartition(topic, p) for p in range(PARTITIONS)])
        k.seek_to_beginning()
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen_k: list[tuple[int, int, bytes]] = []
        seen_c: list[tuple[Any, Any, Any]] = []
        for r in range(ROUNDS):
            _produce_round(bootstrap, topic, r)
            want = (r + 1) * PER_ROUND
            seen_k += _poll_kafka_python(k, want - len(seen_k), 30.0)
            deadline = time.monotonic() + 30.0
            while len(seen_c) < want and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    seen_c.append((m.partition(), m.offset(), m.value()))
            assert len(seen_k) == len(seen_c) == want, (seen_k, seen_c)
        assert sorted(seen_k) == sorted(seen_c)
        meta = next(iter(k._fetcher._session_handlers.values())).next_metadata
        assert meta.session_id != 0 and meta.epoch > 2, meta  # the session was in use all along
    finally:
        k.close()
        c.close()
