"""Listeners: one asyncio server per `listeners` entry, each accepted socket a KafkaConnection.

Shutdown order (main.py drives it): stop accepting, let in-flight requests finish (bounded), then close
the remaining connections.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable

from kafkad.daemon.config import SocketConfig
from kafkad.daemon.config_defs import ListenerSpec
from kafkad.daemon.connection import KafkaConnection
from kafkad.daemon.dispatcher import Dispatcher

log = logging.getLogger(__name__)


class Server:
    def __init__(
        self,
        dispatcher: Dispatcher,
        socket_config: SocketConfig,
        *,
        on_open: Callable[[], None] | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._on_open = on_open
        self._on_close = on_close
        self._dispatcher = dispatcher
        self._cfg = socket_config
        self._servers: list[asyncio.Server] = []
        self.connections: set[KafkaConnection] = set()
        self.bound: list[tuple[str, int]] = []

    def _make(self) -> KafkaConnection:
        conn = KafkaConnection(
            self._dispatcher,
            max_request_bytes=self._cfg.request_max_bytes,
            max_queued=self._cfg.queued_max_requests,
            on_close=self._closed,
        )
        self.connections.add(conn)
        if self._on_open is not None:
            self._on_open()
        return conn

    def _closed(self, conn: KafkaConnection) -> None:
        self.connections.discard(conn)
        if self._on_close is not None:
            self._on_close()

    async def start(self, listeners: tuple[ListenerSpec, ...]) -> list[tuple[str, int]]:
        loop = asyncio.get_running_loop()
        for spec in listeners:
            server = await loop.create_server(
                self._make, host=spec.host or None, port=spec.port, reuse_address=True, backlog=1024
            )
            for sock in server.sockets:
                if self._cfg.send_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._cfg.send_buffer_bytes)
                if self._cfg.receive_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._cfg.receive_buffer_bytes)
                addr = sock.getsockname()
                self.bound.append((str(addr[0]), int(addr[1])))
            self._servers.append(server)
        for host, port in self.bound:
            log.info("listening on %s:%d", host, port)
        return self.bound

    async def close_idle_forever(self) -> None:
        """connections.max.idle.ms: a sweep every quarter of the limit closes silent connections."""
        limit_s = self._cfg.connections_max_idle_ms / 1000
        if limit_s <= 0:
            return
        while True:
            await asyncio.sleep(max(limit_s / 4, 0.05))
            now = time.monotonic()
            for c in list(self.connections):
                if c.idle_since(now) > limit_s:
                    log.info(
                        "%s: idle for more than %d ms: closing", c.peer, self._cfg.connections_max_idle_ms
                    )
                    c.close()

    def stop_accepting(self) -> None:
        for s in self._servers:
            s.close()

    async def drain(self, timeout_s: float) -> bool:
        """Wait until no connection has queued requests (True) or the timeout passes (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while any(c.pending for c in self.connections):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(0.01, remaining))
        return True

    def close_all(self) -> None:
        for c in list(self.connections):
            c.close()
