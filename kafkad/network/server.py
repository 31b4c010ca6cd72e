"""Listeners: one asyncio server per `listeners` entry, each accepted socket a KafkaConnection.

Shutdown order (main.py drives it): stop accepting, let in-flight requests finish (bounded), then close
the remaining connections.

A TLS listener's server gets its listener's SSLContext; each connection on a TLS or SASL listener gets a
security session (kafkad.security); PLAINTEXT connections get neither.

A listener whose host names a network interface binds to that interface's address (`bind_host`, see
netlink.py) and `rebind` moves it when the address changes; open connections are left alone.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kafkad.config.broker_config import SocketConfig
from kafkad.config.defs import ListenerSpec
from kafkad.network.connection import KafkaConnection, ReceiveScratch
from kafkad.network.dispatcher import Dispatcher

if TYPE_CHECKING:
    from kafkad.security.runtime import SecurityRuntime

log = logging.getLogger(__name__)


class Server:
    def __init__(
        self,
        dispatcher: Dispatcher,
        socket_config: SocketConfig,
        *,
        on_open: Callable[[], None] | None = None,
        on_close: Callable[[], None] | None = None,
        security: SecurityRuntime | None = None,
    ) -> None:
        self._security = security
        self._on_open = on_open
        self._on_close = on_close
        self._dispatcher = dispatcher
        self._cfg = socket_config
        self._servers: dict[ListenerSpec, list[asyncio.Server]] = {}
        self._bind_host: Callable[[str], str | None] = lambda host: host
        self._rebinding = asyncio.Lock()
        self._accepting = True
        self.connections: set[KafkaConnection] = set()
        self._scratch = ReceiveScratch()  # every connection's reads land here first (same loop)
        self.bound: list[tuple[str, int]] = []

    def _make(self, listener: str | None = None) -> KafkaConnection:
        sec = self._security
        session = sec.session(listener, self._dispatcher) if sec is not None and listener else None
        conn = KafkaConnection(
            self._dispatcher,
            max_request_bytes=self._cfg.request_max_bytes,
            max_queued=self._cfg.queued_max_requests,
            on_close=self._closed,
            scratch=self._scratch,
            session=session,
            tls=session is not None and session.tls,
        )
        self.connections.add(conn)
        if self._on_open is not None:
            self._on_open()
        return conn

    def _closed(self, conn: KafkaConnection) -> None:
        self.connections.discard(conn)
        if self._on_close is not None:
            self._on_close()

    async def start(
        self,
        listeners: tuple[ListenerSpec, ...],
        bind_host: Callable[[str], str | None] | None = None,
    ) -> list[tuple[str, int]]:
        """Bind every listener; `bind_host` maps a configured host to the address to bind (None: skip)."""
        if bind_host is not None:
            self._bind_host = bind_host
        for spec in listeners:
            await self._bind(spec)
        for host, port in self.bound:
            log.info("listening on %s:%d", host, port)
        return self.bound

    async def _bind(self, spec: ListenerSpec, port: int | None = None) -> None:
        host = self._bind_host(spec.host)
        if host is None:
            self._servers[spec] = []
            log.warning(
                "listener %s://%s:%d: the interface has no IPv4 address yet", spec.name, spec.host, spec.port
            )
            return
        loop = asyncio.get_running_loop()
        sec = self._security
        secure = sec is not None and sec.secured(spec.name)
        factory = functools.partial(self._make, spec.name) if secure else self._make
        ssl = sec.tls_context(spec.name) if sec is not None else None
        port = spec.port if port is None else port
        sock = _literal_socket(host, port) if host else None
        if sock is not None:
            server = await loop.create_server(factory, ssl=ssl, sock=sock, backlog=1024)
        else:
            server = await loop.create_server(
                factory, ssl=ssl, host=host or None, port=port, reuse_address=True, backlog=1024
            )
        for sock in server.sockets:
            if self._cfg.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._cfg.send_buffer_bytes)
            if self._cfg.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._cfg.receive_buffer_bytes)
        self._servers[spec] = [server]
        self._refresh_bound()

    def _refresh_bound(self) -> None:
        self.bound = [
            (str(sock.getsockname()[0]), int(sock.getsockname()[1]))
            for servers in self._servers.values()
            for server in servers
            for sock in server.sockets
        ]

    async def rebind(self, hosts: Iterable[str]) -> None:
        """Re-bind the listeners whose configured host is in `hosts` to where `bind_host` says now."""
        names = set(hosts)
        async with self._rebinding:  # one rebind at a time; each reads the newest address
            for spec in [s for s in self._servers if s.host in names]:
                if not self._accepting:
                    return
                old = self._servers.pop(spec, [])
                # Keep an ephemeral (port 0) listener on the port it got, so clients can still find it.
                port = (
                    next((int(k.getsockname()[1]) for s in old for k in s.sockets), None)
                    if spec.port == 0
                    else None
                )
                for server in old:
                    server.close()
                self._refresh_bound()
                try:
                    await self._bind(spec, port)
                except OSError as e:
                    self._servers[spec] = []
                    log.error("listener %s://%s:%d: cannot bind: %s", spec.name, spec.host, spec.port, e)
                    continue
                for host, p in self.bound:
                    log.info("listening on %s:%d", host, p)

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
        self._accepting = False
        for servers in self._servers.values():
            for s in servers:
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


def _literal_socket(host: str, port: int) -> socket.socket | None:
    """A socket bound to `host` if it is an IP literal, else None (a name: create_server resolves it).

    uvloop's create_server(host=...) encodes any host with the idna codec, which imports
    encodings.idna, stringprep and unicodedata (~0.65 MB of an idle broker's RSS, issue 21 item 3) for
    an address that needs no lookup. Bound as create_server would: SO_REUSEADDR, IPV6_V6ONLY for IPv6,
    and a bind failure worded as asyncio words it ("... address already in use").
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        socket.inet_pton(family, host)
    except OSError:
        return None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(
            e.errno,
            f"error while attempting to bind on address {(host, port)!r}: {(e.strerror or '').lower()}",
        ) from None
    return sock
