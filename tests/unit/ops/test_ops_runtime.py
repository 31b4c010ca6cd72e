"""OpsRuntime: the readiness gate of /healthz, sd_notify lifecycle and watchdog, over real sockets."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from kafkad.service.health import OpsRuntime
from kafkad.service.metrics import BrokerMetrics, api_label
from kafkad.service.sdnotify import Notifier


async def _status(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_lifecycle(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    broker_ok = True

    async def main() -> None:
        nonlocal broker_ok
        ops = OpsRuntime(
            ["http://127.0.0.1:0"],
            healthy=lambda: broker_ok,
            notifier=Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "60000000"}),
        )
        await ops.start()
        assert ops.http is not None
        (port,) = ops.http.bound_ports()
        await asyncio.sleep(0)  # let the watchdog task take its first turn
        assert (await _status(port, "/healthz"))[0] == 503  # still starting
        ops.ready("serving")
        assert (await _status(port, "/healthz"))[0] == 200
        broker_ok = False
        assert (await _status(port, "/healthz"))[0] == 503
        broker_ok = True
        ops.metrics.record_api(0, 0.002)
        status, body = await _status(port, "/metrics")
        assert status == 200
        names = {s.name: s for f in text_string_to_metric_families(body.decode()) for s in f.samples}
        assert names["kafka_network_requestmetrics_requests_total"].labels == {"request": "Produce"}
        assert "kafkad_event_loop_lag_seconds_count" in names
        ops.stopping()
        assert (await _status(port, "/healthz"))[0] == 503
        await ops.close()
        assert ops.http is None

    try:
        asyncio.run(main())
        got = [sock.recv(4096).decode().split("\n")[0] for _ in range(3)]
    finally:
        sock.close()
    assert got == ["WATCHDOG=1", "READY=1", "STOPPING=1"]


def test_without_listeners_or_systemd_nothing_is_bound() -> None:
    async def main() -> None:
        ops = OpsRuntime([], notifier=Notifier({}), metrics=BrokerMetrics(process=False))
        await ops.start()
        assert ops.http is None
        ops.ready()
        assert ops.is_healthy()
        await ops.close()

    asyncio.run(main())


def test_api_label_uses_kafka_request_names() -> None:
    assert api_label(0) == "Produce"
    assert api_label(2) == "ListOffsets"
    assert api_label(18) == "ApiVersions"
    assert api_label(9999) == "Api9999"
