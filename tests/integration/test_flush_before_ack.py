"""flush.messages=1 (topic override) and log.flush.interval.messages=1 (broker default): every Produce is
answered only after its records were fsynced (issue 18 item 1). The broker's group-commit counters
(kafkad_log_fsync_records: messages the recovery point moved over, updated before any waiter is answered)
are read right after each acknowledgement, never waiting for the periodic flush pass; with Kafka's
defaults nothing is fsynced before the answer.
"""

from __future__ import annotations

import re

import pytest

from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.clients import create_topics
from tests.integration.test_storage_faults import metrics

pytestmark = pytest.mark.integration


def _synced(port: int) -> tuple[int, int]:
    """(fsyncs, messages fsynced) from the broker's /metrics."""
    text = metrics(port)
    values = {}
    for name in ("kafkad_log_fsyncs_total", "kafkad_log_fsync_records_total"):
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        assert m is not None, f"{name} not exported"
        values[name] = int(float(m.group(1)))
    return values["kafkad_log_fsyncs_total"], values["kafkad_log_fsync_records_total"]


def _produce_one_by_one(bootstrap: str, topic: str, count: int, port: int, expect_synced: bool) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0, "enable.idempotence": False}
    )
    acked: list[int] = []
    try:
        _, before = _synced(port)
        for i in range(count):
            producer.produce(
                topic, value=b"v%d" % i, on_delivery=lambda err, msg: acked.append(0 if err else 1)
            )
            assert producer.flush(60) == 0
            assert acked[-1] == 1
            _, synced = _synced(port)
            if expect_synced:
                assert synced - before >= i + 1, f"record {i} acknowledged before it was fsynced"
            else:
                assert synced == before, "Kafka's defaults fsynced before answering"
    finally:
        producer.flush(10)


def test_flush_messages_1_answers_only_after_the_fsync(tmp_path) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    with BrokerProcess(tmp_path / "kafkad", {"metrics.listeners": f"http://127.0.0.1:{port}"}) as broker:
        create_topics(broker.bootstrap, {"synced": 1, "plain": 1}, {"synced": {"flush.messages": "1"}})
        _produce_one_by_one(broker.bootstrap, "plain", 20, port, expect_synced=False)
        _produce_one_by_one(broker.bootstrap, "synced", 50, port, expect_synced=True)
        fsyncs, records = _synced(port)
        assert records == 50 and 1 <= fsyncs <= 50

        broker.restart({"log.flush.interval.messages": "1"})  # the broker default now covers "plain" too
        _produce_one_by_one(broker.bootstrap, "plain", 30, port, expect_synced=True)
        assert "ERROR" not in broker.log_text(since_start=False)
