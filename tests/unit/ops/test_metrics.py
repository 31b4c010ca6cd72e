"""Broker metrics: values change as the hot path records, served over real HTTP on the event loop."""

from __future__ import annotations

import asyncio
import os
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, Gauge, Histogram
from prometheus_client.parser import text_string_to_metric_families

from kafkad.service.health import OpsHttpServer, parse_listener, start_ops_server
from kafkad.service.metrics import BrokerMetrics, LoopLagMonitor


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(sorted(labels.items())))]


def test_hot_path_counters_and_histogram() -> None:
    m = BrokerMetrics(process=False)
    m.record_produce("orders", 1000, 10)
    m.record_produce("orders", 500, 5)
    m.record_produce("clicks", 7, 1)
    m.record_fetch("orders", 300)
    m.record_request("Produce", 0.003)
    m.record_request("Produce", 0.2)
    m.record_error("Produce", "NOT_LEADER_OR_FOLLOWER")
    m.record_failed_produce("orders")
    m.connection_opened()
    m.connection_opened()
    m.connection_closed()
    t = m.exposition().decode()
    assert value(t, "kafka_server_brokertopicmetrics_bytesin_total", topic="orders") == 1500
    assert value(t, "kafka_server_brokertopicmetrics_messagesin_total", topic="orders") == 15
    assert value(t, "kafka_server_brokertopicmetrics_bytesin_total", topic="clicks") == 7
    assert value(t, "kafka_server_brokertopicmetrics_bytesout_total", topic="orders") == 300
    assert value(t, "kafka_network_requestmetrics_requests_total", request="Produce") == 2
    assert value(t, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == 2
    assert value(t, "kafka_network_requestmetrics_totaltimems_sum", request="Produce") == pytest.approx(203.0)
    assert value(t, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="5.0") == 1
    assert (
        value(
            t, "kafka_network_requestmetrics_errors_total", request="Produce", error="NOT_LEADER_OR_FOLLOWER"
        )
        == 1
    )
    assert value(t, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="orders") == 1
    assert value(t, "kafka_server_socketservermetrics_connection_count") == 1
    m.forget_topic("clicks")
    assert ("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "clicks"),)) not in samples(
        m.exposition().decode()
    )


def test_private_registries_do_not_collide() -> None:
    a, b = BrokerMetrics(process=False), BrokerMetrics(process=False)
    a.record_fetch("t", 5)
    assert value(a.exposition().decode(), "kafka_server_brokertopicmetrics_bytesout_total", topic="t") == 5
    assert "kafka_server_brokertopicmetrics_bytesout_total{" not in b.exposition().decode()
    assert REGISTRY.get_sample_value("kafka_server_brokertopicmetrics_bytesout_total", {"topic": "t"}) is None


def test_bound_state_is_read_at_scrape_time(tmp_path: Path) -> None:
    m = BrokerMetrics()
    partitions = {("orders", 0): 4096, ("orders", 1): 0}
    m.bind(
        partition_count=lambda: len(partitions),
        leader_count=lambda: 1,
        log_sizes=lambda: [(t, p, s) for (t, p), s in partitions.items()],
        log_dirs=[str(tmp_path), str(tmp_path / "missing")],
    )
    t = m.exposition().decode()
    assert value(t, "kafka_server_replicamanager_partitioncount") == 2
    assert value(t, "kafka_server_replicamanager_leadercount") == 1
    assert value(t, "kafka_log_log_size", topic="orders", partition="0") == 4096
    st = os.statvfs(tmp_path)
    assert value(t, "kafka_log_dir_total_bytes", dir=str(tmp_path)) == st.f_blocks * st.f_frsize
    assert value(t, "kafka_log_dir_free_bytes", dir=str(tmp_path)) > 0
    assert not any(k[0] == "kafka_log_dir_free_bytes" and "missing" in str(k[1]) for k in samples(t))
    assert value(t, "process_resident_memory_bytes") > 10_000_000
    assert value(t, "process_open_fds") >= 3
    partitions[("clicks", 0)] = 1
    assert value(m.exposition().decode(), "kafka_server_replicamanager_partitioncount") == 3


def test_a_failing_source_does_not_break_the_scrape() -> None:
    m = BrokerMetrics(process=False)
    m.bind(partition_count=lambda: 1 // 0, leader_count=lambda: 5)
    t = m.exposition().decode()
    assert value(t, "kafka_server_replicamanager_leadercount") == 5
    assert "kafka_server_replicamanager_partitioncount" not in t


def test_loop_lag_monitor_records_oversleep() -> None:
    m = BrokerMetrics(process=False)
    times = iter([100.0, 100.75, 200.0, 200.5, 300.0])  # (start, wake) pairs: 0.25 s late, then on time
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            raise asyncio.CancelledError

    lag = LoopLagMonitor(m.loop_lag, m.loop_lag_last, 0.5, now=lambda: next(times), sleep=fake_sleep)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(lag.run())
    t = m.exposition().decode()
    assert value(t, "kafkad_event_loop_lag_seconds_count") == 2
    assert value(t, "kafkad_event_loop_lag_seconds_sum") == pytest.approx(0.25)
    assert value(t, "kafkad_event_loop_lag_last_seconds") == 0.0
    assert isinstance(m.loop_lag, Histogram) and isinstance(m.loop_lag_last, Gauge)


def test_parse_listener() -> None:
    assert parse_listener("http://127.0.0.1:9404") == parse_listener("127.0.0.1:9404")
    assert parse_listener("http://[::1]:9404").host == "::1"
    assert parse_listener("https://127.0.0.1:9404").tls and not parse_listener("127.0.0.1:9404").tls
    with pytest.raises(ValueError):
        parse_listener("ftp://127.0.0.1:9404")
    with pytest.raises(ValueError):
        parse_listener("http://127.0.0.1")


async def _get(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_http_metrics_and_healthz_over_the_wire() -> None:
    m = BrokerMetrics()
    serving = False

    async def main() -> None:
        nonlocal serving
        server = await start_ops_server(m, lambda: serving, ["http://127.0.0.1:0"])
        (port,) = server.bound_ports()
        try:
            assert (await _get(port, "/healthz")) == (503, b"unavailable\n")
            serving = True
            assert (await _get(port, "/healthz")) == (200, b"ok\n")
            assert (await _get(port, "/healthz", "HEAD")) == (200, b"")
            assert (await _get(port, "/nope"))[0] == 404
            assert (await _get(port, "/metrics", "POST"))[0] == 405

            status, body = await _get(port, "/metrics")
            assert status == 200
            before = samples(body.decode()).get(
                ("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "orders"),)), 0.0
            )
            m.record_produce("orders", 2048, 3)
            m.record_request("Fetch", 0.5)
            # A real HTTP client, off the loop, while the loop serves it.
            loop = asyncio.get_running_loop()
            text = await loop.run_in_executor(
                None,
                lambda: (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
                ),
            )
            assert (
                value(text, "kafka_server_brokertopicmetrics_bytesin_total", topic="orders") == before + 2048
            )
            assert value(text, "kafka_network_requestmetrics_totaltimems_count", request="Fetch") == 1
            assert value(text, "process_open_fds") > 0
        finally:
            await server.close()
        with pytest.raises(OSError):
            await _get(port, "/healthz")

    asyncio.run(main())


def test_healthz_that_raises_is_unhealthy() -> None:
    def broken() -> bool:
        raise RuntimeError("state gone")

    async def main() -> None:
        server = OpsHttpServer(BrokerMetrics(process=False), broken, ["http://127.0.0.1:0"])
        await server.start()
        try:
            assert (await _get(server.bound_ports()[0], "/healthz"))[0] == 503
        finally:
            await server.close()

    asyncio.run(main())
