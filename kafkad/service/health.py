"""The ops HTTP endpoint: GET /metrics (Prometheus text format) and GET /healthz, on `metrics.listeners`.

How it works: a tiny HTTP/1.0-style server (one request per connection, then close) started with
`asyncio.start_server` on the broker's own event loop, not in a thread. Why: the scrape calls the
collectors bound with `BrokerMetrics.bind` (partition counts, log sizes) and `healthy()`, which read
state owned by the event loop; on the loop they need no locks, and a stuck loop shows up as a failed
scrape/health check, which is what an operator wants to see. A scrape costs a few ms of loop time.

/healthz answers 200 "ok" while `healthy()` returns True (the broker serves: listeners bound, logs
loaded, registered), else 503 "unavailable". Anything else is 404; non-GET/HEAD methods get 405.

`OpsRuntime` bundles what the daemon starts once for operations: the sd_notify `Notifier` and its
watchdog task, `BrokerMetrics` with its loop-lag monitor, and this endpoint, with the readiness gate
(/healthz is 503 until `ready()` and again from `stopping()`). Without metrics listeners (and without
a caller that keeps them, the bridge) nothing could read the metrics: none are kept, and neither
prometheus_client nor psutil is imported (~3.5 MB of an idle broker's RSS).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from kafkad.service.sdnotify import Notifier, start_watchdog

if TYPE_CHECKING:
    from kafkad.service.metrics import BrokerMetrics

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 8192
READ_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class HttpListener:
    host: str
    port: int
    tls: bool = False  # https://: served with the broker's metrics TLS context (kafkad.security)


def parse_listener(url: str) -> HttpListener:
    """ "http://127.0.0.1:9404" -> HttpListener("127.0.0.1", 9404); "[::1]:9404" style hosts allowed;
    "https://..." is served over TLS."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"metrics listener {url!r}: only http:// and https:// are supported")
    if parts.port is None or parts.hostname is None:
        raise ValueError(f"metrics listener {url!r}: expected http(s)://host:port")
    return HttpListener(parts.hostname, parts.port, parts.scheme == "https")


class OpsHttpServer:
    """Serves /metrics and /healthz on the running loop. `start()` binds, `close()` stops."""

    def __init__(
        self,
        metrics: BrokerMetrics,
        healthy: Callable[[], bool],
        listeners: Iterable[str],
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._ssl = ssl_context
        self._metrics = metrics
        self._healthy = healthy
        self._listeners = [parse_listener(u) for u in listeners]
        self._servers: list[asyncio.Server] = []
        from prometheus_client import CONTENT_TYPE_LATEST

        self._content_type = CONTENT_TYPE_LATEST

    async def start(self) -> None:
        for lst in self._listeners:
            if lst.tls and self._ssl is None:
                raise ValueError(
                    f"metrics listener https://{lst.host}:{lst.port}: no TLS key store configured"
                )
            server = await asyncio.start_server(
                self._handle, lst.host, lst.port, reuse_address=True, ssl=self._ssl if lst.tls else None
            )
            self._servers.append(server)
            scheme = "https" if lst.tls else "http"
            log.info("metrics and health endpoint on %s://%s:%d/", scheme, lst.host, self.bound_ports()[-1])

    def bound_ports(self) -> list[int]:
        """Actual ports (useful with port 0 in tests), in listener order."""
        return [int(s.sockets[0].getsockname()[1]) for s in self._servers if s.sockets]

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            if len(head) > MAX_REQUEST_HEAD:
                return
            status, ctype, body, head_only = self._respond(head)
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\nCache-Control: no-store\r\n\r\n".encode()
            )
            if not head_only:
                writer.write(body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _respond(self, head: bytes) -> tuple[str, str, bytes, bool]:
        try:
            method, target, _version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        except ValueError:
            return "400 Bad Request", "text/plain", b"bad request\n", False
        path = target.split("?", 1)[0]
        head_only = method == "HEAD"
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"method not allowed\n", False
        if path == "/metrics":
            return "200 OK", self._content_type, self._metrics.exposition(), head_only
        if path == "/healthz":
            try:
                ok = self._healthy()
            except Exception:
                log.exception("health check raised")
                ok = False
            if ok:
                return "200 OK", "text/plain", b"ok\n", head_only
            return "503 Service Unavailable", "text/plain", b"unavailable\n", head_only
        return "404 Not Found", "text/plain", b"not found\n", head_only


async def start_ops_server(
    metrics: BrokerMetrics,
    healthy: Callable[[], bool],
    listeners: Iterable[str],
    ssl_context: ssl.SSLContext | None = None,
) -> OpsHttpServer:
    """Bind every `metrics.listeners` URL on the running loop; an empty list serves nothing."""
    server = OpsHttpServer(metrics, healthy, listeners, ssl_context)
    await server.start()
    return server


class OpsRuntime:
    """sd_notify + watchdog, metrics + loop lag, /metrics + /healthz: one object for main.py.

    Lifecycle: `await start()` first thing on the loop (watchdog pings cover a long log recovery),
    `ready(status)` once listeners are bound, `stopping()` when shutdown begins, `await close()` last.
    `healthy` is the broker's own opinion (e.g. registered in ZooKeeper, log dirs writable); /healthz
    is 200 only between ready() and stopping() AND while it returns True.
    """

    def __init__(
        self,
        metrics_listeners: Iterable[str],
        *,
        healthy: Callable[[], bool] = lambda: True,
        notifier: Notifier | None = None,
        metrics: BrokerMetrics | None = None,
        loop_lag_interval: float = 0.5,
        ssl_context: ssl.SSLContext | None = None,
        keep_metrics: bool = False,
    ) -> None:
        self._ssl = ssl_context
        self.notifier = Notifier() if notifier is None else notifier
        self._healthy = healthy
        self._listeners = tuple(metrics_listeners)
        # None: no listener serves them and no caller keeps them (keep_metrics): nothing is counted.
        self.metrics: BrokerMetrics | None = metrics
        if metrics is None and (self._listeners or keep_metrics):
            from kafkad.service.metrics import BrokerMetrics

            self.metrics = BrokerMetrics()
        self._loop_lag_interval = loop_lag_interval
        self._ready = False
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self.http: OpsHttpServer | None = None

    def is_healthy(self) -> bool:
        return self._ready and not self._stopping and self._healthy()

    async def start(self) -> None:
        watchdog = start_watchdog(self.notifier)
        if watchdog is not None:
            self._tasks.append(watchdog)
        if self.metrics is not None:
            self._tasks.append(self.metrics.start_loop_lag_monitor(self._loop_lag_interval))
        if self._listeners:
            assert self.metrics is not None  # made in __init__ when there are listeners
            self.http = await start_ops_server(self.metrics, self.is_healthy, self._listeners, self._ssl)

    def status(self, text: str) -> None:
        self.notifier.status(text)

    def ready(self, status: str | None = None) -> None:
        self._ready = True
        self.notifier.ready(status)

    def stopping(self, status: str | None = "flushing logs") -> None:
        self._stopping = True
        self.notifier.stopping(status)

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()
            self.http = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.notifier.close()
