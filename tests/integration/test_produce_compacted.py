"""A compacted topic refuses records without a key, as Kafka does (INVALID_RECORD, error code 87).

Real clients against the session kafkad: confluent-kafka's delivery report carries INVALID_RECORD for a
keyless record and succeeds for a keyed one, a plain topic still takes keyless records, kafka-python
fails the send with InvalidRecordError, and a raw Produce v8 shows record_errors and error_message.
Nothing of a refused partition is appended; other partitions of the same request are unaffected.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from kafkad.api.produce import MAX_RECORD_ERRORS
from kafkad.protocol import ApiKey, ErrorCode
from kafkad.storage.records import Compression, SimpleRecord, build_batch
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import create_topics
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

NOW_MS = int(time.time() * 1000)


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _deliver(bootstrap: str, topic: str, key: bytes | None, codec: str = "none") -> tuple[int | None, int]:
    """Produce one record to partition 0 with confluent-kafka: (error code or None, offset)."""
    reports: list[tuple[int | None, int]] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        reports.append((None if err is None else err.code(), msg.offset()))

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 0,
            "message.timeout.ms": 60000,
        }
    )
    p.produce(topic, key=key, value=b"value", partition=0, on_delivery=on_delivery)
    assert p.flush(90) == 0, "record not delivered in time"
    assert len(reports) == 1
    return reports[0]


def _produce_raw(raw: Raw, version: int, topic_data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = {"acks": -1, "timeout_ms": 10000, "transactional_id": None, "topic_data": topic_data}
    return list(raw.call(ApiKey.PRODUCE, version, body)["responses"])


def _high_watermark(raw: Raw, topic: str, partition: int) -> int:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    part = raw.call(ApiKey.FETCH, 11, body)["responses"][0]["partitions"][0]
    assert part["error_code"] == 0
    return int(part["high_watermark"])


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_confluent_keyless_record_is_refused_by_compacted_topic(
    bootstrap: str, policy: str, codec: str
) -> None:
    compacted, plain = _topic("compacted"), _topic("plain")
    create_topics(bootstrap, {compacted: 1, plain: 1}, {compacted: {"cleanup.policy": policy}})

    error, _ = _deliver(bootstrap, compacted, None, codec)
    assert error == KafkaError.INVALID_RECORD
    assert _deliver(bootstrap, compacted, b"key", codec) == (None, 0)  # the refused record took no offset
    assert _deliver(bootstrap, plain, None, codec) == (None, 0)


def test_topic_altered_to_compact_refuses_keyless_records(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

    topic = _topic("altered")
    create_topics(bootstrap, {topic: 1})
    assert _deliver(bootstrap, topic, None) == (None, 0)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"cleanup.policy": "compact"})
    for f in admin.alter_configs([resource]).values():
        f.result(60)
    assert _deliver(bootstrap, topic, None)[0] == KafkaError.INVALID_RECORD
    assert _deliver(bootstrap, topic, b"k") == (None, 1)


def test_kafka_python_send_fails_with_invalid_record(bootstrap: str) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    topic = _topic("compacted-kp")
    create_topics(bootstrap, {topic: 1}, {topic: {"cleanup.policy": "compact"}})
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, linger_ms=0)
    try:
        with pytest.raises(InvalidRecordError):
            producer.send(topic, value=b"no key", partition=0).get(timeout=60)
        assert producer.send(topic, key=b"k", value=b"keyed", partition=0).get(timeout=60).offset == 0
    finally:
        producer.close(timeout=10)


def test_raw_produce_v8_carries_record_errors_and_error_message(session_broker: BrokerProcess) -> None:
    compacted, plain = _topic("compacted-raw"), _topic("plain-raw")
    create_topics(
        session_broker.bootstrap, {compacted: 2, plain: 1}, {compacted: {"cleanup.policy": "compact"}}
    )
    keyless = build_batch(
        [
            SimpleRecord(b"a", b"1", timestamp=NOW_MS),
            SimpleRecord(None, b"2", timestamp=NOW_MS),
            SimpleRecord(b"c", b"3", timestamp=NOW_MS),
            SimpleRecord(None, b"4", timestamp=NOW_MS),
        ],
        compression=Compression.LZ4,
    )
    keyed = build_batch([SimpleRecord(b"k", b"v", timestamp=NOW_MS)])
    raw = Raw(session_broker.port)
    try:
        responses = _produce_raw(
            raw,
            8,
            [
                {
                    "name": compacted,
                    "partition_data": [{"index": 0, "records": keyless}, {"index": 1, "records": keyed}],
                },
                {"name": plain, "partition_data": [{"index": 0, "records": keyless}]},
            ],
        )
        by_topic = {r["name"]: r["partition_responses"] for r in responses}
        refused, accepted = sorted(by_topic[compacted], key=lambda p: p["index"])
        text = f"Compacted topic cannot accept message without key in topic partition {compacted}-0."
        assert refused["error_code"] == ErrorCode.INVALID_RECORD
        assert refused["error_code"] == 87  # the wire code clients see
        assert refused["base_offset"] == -1
        assert [(e["batch_index"], e["batch_index_error_message"]) for e in refused["record_errors"]] == [
            (1, text),
            (3, text),
        ]
        assert refused["error_message"] is not None
        assert "2 record errors" in refused["error_message"] and text in refused["error_message"]
        assert (accepted["error_code"], accepted["base_offset"]) == (0, 0)
        assert (by_topic[plain][0]["error_code"], by_topic[plain][0]["base_offset"]) == (0, 0)
        assert _high_watermark(raw, compacted, 0) == 0  # nothing of the refused partition was appended
        assert _high_watermark(raw, compacted, 1) == 1
        assert _high_watermark(raw, plain, 0) == 4

        # Two batches, the second keyless: the whole partition is refused, the first batch included.
        both = keyed + build_batch([SimpleRecord(None, b"x", timestamp=NOW_MS)])
        [[second]] = [r["partition_responses"] for r in _produce_raw(raw, 8, [_one(compacted, both)])]
        assert second["error_code"] == ErrorCode.INVALID_RECORD
        assert [e["batch_index"] for e in second["record_errors"]] == [1]
        assert _high_watermark(raw, compacted, 0) == 0

        # Many keyless records: the listed record_errors are capped, error_message gives the total.
        many = build_batch([SimpleRecord(None, b"", timestamp=NOW_MS)] * (MAX_RECORD_ERRORS + 500))
        [[capped]] = [r["partition_responses"] for r in _produce_raw(raw, 8, [_one(compacted, many)])]
        assert [e["batch_index"] for e in capped["record_errors"]] == list(range(MAX_RECORD_ERRORS))
        assert f"{MAX_RECORD_ERRORS + 500} record errors" in capped["error_message"]

        # Before v8 the response cannot carry record_errors or error_message; the error code is the same.
        [[old]] = [r["partition_responses"] for r in _produce_raw(raw, 7, [_one(compacted, keyless)])]
        assert old["error_code"] == ErrorCode.INVALID_RECORD and old["base_offset"] == -1
        assert _high_watermark(raw, compacted, 0) == 0
    finally:
        raw.close()


def _one(topic: str, records: bytes) -> dict[str, Any]:
    return {"name": topic, "partition_data": [{"index": 0, "records": records}]}
