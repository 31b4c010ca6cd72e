"""Issue 23 item 4: the newest confluent-kafka (librdkafka) picks kafkad's new maxima, seen in its own
protocol trace (debug=protocol: "Sent <Api>Request (v<N>, ...)").

Before the matrix change it sent Fetch v11, Metadata v8, Produce v8, OffsetCommit v7, OffsetFetch v5;
now the flexible versions Fetch v16 (topics by id), Metadata v12, Produce v10, OffsetCommit v9,
OffsetFetch v9.
"""

from __future__ import annotations

import logging
import re
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import create_topics

pytestmark = pytest.mark.integration

SENT = re.compile(r"Sent (\w+)Request \(v(\d+)")


class _Trace(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.versions: dict[str, set[int]] = defaultdict(set)

    def emit(self, record: logging.LogRecord) -> None:
        m = SENT.search(record.getMessage())
        if m:
            self.versions[m.group(1)].add(int(m.group(2)))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("kafkad-client-versions")) as b:
        yield b
        log = b.log_text()
        assert "ERROR" not in log and "Traceback" not in log


def test_librdkafka_picks_the_new_maxima(broker: BrokerProcess) -> None:
    create_topics(broker.bootstrap, {"cv": 1})
    trace = _Trace()
    log = logging.getLogger("test_client_versions.rdkafka")
    log.addHandler(trace)
    log.setLevel(logging.DEBUG)
    conf = {"bootstrap.servers": broker.bootstrap, "debug": "protocol", "logger": log}
    producer = Producer(conf)
    producer.produce("cv", b"x")
    assert producer.flush(30) == 0
    consumer = Consumer(dict(conf, **{"group.id": "cv-group", "auto.offset.reset": "earliest"}))
    consumer.subscribe(["cv"])
    deadline = time.monotonic() + 60
    msg = None
    while msg is None and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            msg = m
    assert msg is not None and msg.value() == b"x"
    consumer.commit(asynchronous=False)
    assert consumer.committed([TopicPartition("cv", 0)], timeout=30)[0].offset == 1
    consumer.close()
    picked = {api: max(v) for api, v in trace.versions.items()}
    assert picked["Fetch"] == 16  # librdkafka's maximum: topic ids (KIP-516) since kafkad has them
    assert picked["Metadata"] == 12
    assert picked["Produce"] >= 9  # flexible (v10 with librdkafka 2.16)
    assert picked["OffsetCommit"] == 9
    assert picked["OffsetFetch"] == 9
