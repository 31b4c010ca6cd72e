"""The hot-path series of BrokerMetrics (plain numbers exported at scrape time) read like prometheus ones."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkad.protocol import ApiKey
from kafkad.service.metrics import BrokerMetrics


def _samples(m: BrokerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(m.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_record_api_fills_cumulative_buckets_by_kafka_name() -> None:
    m = BrokerMetrics(process=False)
    for seconds in (0.0001, 0.005, 0.0050001, 100.0):  # 0.1 ms, exactly 5 ms, just above, past the top
        m.record_api(int(ApiKey.PRODUCE), seconds)
    m.record_api(int(ApiKey.LIST_OFFSETS), 0.001)
    s = _samples(m)

    def bucket(le: str, request: str = "Produce") -> float:
        return s[("kafka_network_requestmetrics_totaltimems_bucket", (("le", le), ("request", request)))]

    assert bucket("0.25") == 1
    assert bucket("5.0") == 2  # le is inclusive
    assert bucket("10.0") == 3
    assert bucket("30000.0") == 3
    assert bucket("+Inf") == 4
    assert s[("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),))] == 4
    assert s[("kafka_network_requestmetrics_totaltimems_sum", (("request", "Produce"),))] == pytest.approx(
        100010.1001
    )
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "ListOffsets"),))] == 1
    assert bucket("1.0", "ListOffsets") == 1 and bucket("0.5", "ListOffsets") == 0


def test_record_api_and_record_request_share_one_series() -> None:
    m = BrokerMetrics(process=False)
    m.record_request("Fetch", 0.002)
    m.record_api(int(ApiKey.FETCH), 0.002)
    assert _samples(m)[("kafka_network_requestmetrics_requests_total", (("request", "Fetch"),))] == 2


def test_topic_counters_accumulate_and_are_forgotten() -> None:
    m = BrokerMetrics(process=False)
    m.record_produce("a", 100, 3)
    m.record_produce("a", 50, 1)
    m.record_fetch("a", 70)
    m.record_fetch("b", 1)
    s = _samples(m)
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "a"),))] == 150
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "a"),))] == 4
    assert s[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "a"),))] == 70
    m.forget_topic("a")
    s = _samples(m)
    assert ("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "a"),)) not in s
    assert ("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "a"),)) not in s
    assert s[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "b"),))] == 1
    m.record_produce("a", 5, 1)  # a re-created topic starts from zero
    assert _samples(m)[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "a"),))] == 5
