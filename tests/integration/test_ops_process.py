"""sd_notify, the watchdog, /metrics and /healthz checked against a real kafkad process.

The test plays systemd: it binds its own AF_UNIX datagram socket, starts kafkad with NOTIFY_SOCKET pointing
at it and WATCHDOG_USEC set, and reads what arrives. READY=1 must come only once the Kafka port accepts.
Then real clients produce and consume, and the per-topic counters on /metrics must account for them.
"""

from __future__ import annotations

import itertools
import queue
import signal
import socket
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.clients import CLIENTS, check_roundtrip, make_records

pytestmark = pytest.mark.integration

WATCHDOG_USEC = 200_000  # pings every 100 ms
WATCHDOG_PINGS = 11  # the median of 10 intervals: one stall of a loaded machine does not decide it


class NotifyListener:
    """Plays systemd's side: reads every datagram at once (a real service manager never lets the queue
    fill; with net.unix.max_dgram_qlen at 10 an unread socket would stall the sender)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self._sock.settimeout(0.2)
        self.messages: queue.Queue[tuple[float, list[str]]] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                continue
            self.messages.put((time.monotonic(), data.decode().split("\n")))

    def next(self, timeout_s: float = 60.0) -> list[str]:
        return self.next_at(timeout_s)[1]

    def next_at(self, timeout_s: float = 60.0) -> tuple[float, list[str]]:
        """(monotonic time of arrival, lines) of the next datagram."""
        return self.messages.get(timeout=timeout_s)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


@pytest.fixture()
def notify(tmp_path: Path) -> Iterator[NotifyListener]:
    listener = NotifyListener(tmp_path / "notify.sock")
    try:
        yield listener
    finally:
        listener.close()


def _http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return int(r.status), bytes(r.read())
    except urllib.error.HTTPError as e:
        return int(e.code), bytes(e.read())


def _samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def _topic_counter(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, topic: str
) -> float:
    return samples.get((name, (("topic", topic),)), 0.0)


def _connectable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_notify_watchdog_metrics_health(
    notify: NotifyListener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics_port = free_port()
    monkeypatch.setenv("NOTIFY_SOCKET", notify.path)
    monkeypatch.setenv("WATCHDOG_USEC", str(WATCHDOG_USEC))
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    broker = BrokerProcess(tmp_path / "kafkad", {"metrics.listeners": f"http://127.0.0.1:{metrics_port}"})
    starter = threading.Thread(target=broker.start)  # BrokerProcess.start blocks until it serves
    starter.start()
    try:
        messages: list[list[str]] = []
        port_open_at_ready: bool | None = None
        while port_open_at_ready is None:
            msg = notify.next()
            messages.append(msg)
            if "READY=1" in msg:
                port_open_at_ready = _connectable(broker.port)
        starter.join(120)
        assert broker.running, broker.log_text()
        assert port_open_at_ready, "READY=1 arrived before the Kafka port accepted connections"
        before_ready = messages[:-1]
        ready = messages[-1]
        assert ["STATUS=loading logs"] in before_ready, messages
        assert broker.proc is not None and f"MAINPID={broker.proc.pid}" in ready, ready
        assert any(line.startswith("STATUS=serving") for line in ready), ready

        # Watchdog pings keep coming at about WATCHDOG_USEC / 2. Judged on the median interval (arrival
        # times stamped by the listener thread), not a total: a loaded machine may stall one turn, but a
        # ping pace slower than systemd's WatchdogSec itself would get the service killed.
        arrivals: list[float] = []
        while len(arrivals) < WATCHDOG_PINGS:
            at, lines = notify.next_at()
            if lines == ["WATCHDOG=1"]:
                arrivals.append(at)
        intervals = [b - a for a, b in itertools.pairwise(arrivals)]
        median = statistics.median(intervals)
        print(f"watchdog ping interval: median {median * 1000:.0f} ms, max {max(intervals) * 1000:.0f} ms")
        assert median < WATCHDOG_USEC / 1e6, f"watchdog pings too slow: median {median * 1000:.0f} ms"

        base = f"http://127.0.0.1:{metrics_port}"
        assert _http_get(f"{base}/healthz") == (200, b"ok\n")
        status, body = _http_get(f"{base}/metrics")
        assert status == 200
        before = _samples(body)
        assert _topic_counter(before, "kafka_server_brokertopicmetrics_messagesin_total", "opsm") == 0

        confluent = CLIENTS["confluent"]
        recs = make_records(3_000, 2, int(time.time() * 1000) - 10_000)
        confluent.create_topic(broker.bootstrap, "opsm", 2)
        confluent.produce(broker.bootstrap, "opsm", recs, "none")
        got = confluent.consume(broker.bootstrap, "opsm", 2, expect=len(recs))
        check_roundtrip(recs, sorted(got, key=lambda g: (g.partition, g.offset)))

        after = _samples(_http_get(f"{base}/metrics")[1])
        payload = sum(len(r.key or b"") + len(r.value or b"") for r in recs)
        bytes_in = _topic_counter(after, "kafka_server_brokertopicmetrics_bytesin_total", "opsm")
        bytes_out = _topic_counter(after, "kafka_server_brokertopicmetrics_bytesout_total", "opsm")
        msgs_in = _topic_counter(after, "kafka_server_brokertopicmetrics_messagesin_total", "opsm")
        print(
            f"bytes in {bytes_in:.0f}, bytes out {bytes_out:.0f}, messages in {msgs_in:.0f}, payload {payload}"
        )
        # Uncompressed batches are stored as received, so the bytes counted in are the bytes on disk
        # (a client retry could only add to the count): exact whatever batching the client chose.
        stored = sum(f.stat().st_size for p in (0, 1) for f in (broker.data_dir / f"opsm-{p}").glob("*.log"))
        assert msgs_in == len(recs)
        assert bytes_in > payload  # record framing and batch headers on top of keys and values
        assert stored <= bytes_in < 2 * stored, (stored, bytes_in)
        assert bytes_out >= stored  # every stored batch was fetched at least once
        produce_requests = after.get(
            ("kafka_network_requestmetrics_requests_total", (("request", "Produce"),))
        )
        assert produce_requests and produce_requests >= 1
        assert after.get(("kafka_server_socketservermetrics_connection_count", ()), 0) >= 0

        # SIGTERM: STOPPING=1 arrives, the process exits 0.
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGTERM)
        stopping = None
        deadline = time.monotonic() + 60
        while stopping is None and time.monotonic() < deadline:
            lines = notify.next()
            if "STOPPING=1" in lines:
                stopping = lines
        assert stopping is not None, "no STOPPING=1 after SIGTERM"
        assert broker.stop() == 0
        assert "shut down cleanly" in broker.log_text()
    finally:
        starter.join(120)
        if broker.running:
            broker.kill9()
