"""Listeners named by network interface (`PLAINTEXT://eth0:9092`) that follow the interface's IPv4 address.

How it works: a listener (or advertised listener) whose host is the name of an existing interface, not an
IP literal, is an interface listener. At start `resolve_ipv4` (blocking: call in executor) dumps the IPv4
addresses over rtnetlink (pyroute2 `IPRoute`) and the daemon binds each such listener to its interface's
primary address. `NetlinkWatcher` then keeps a reader thread on an rtnetlink socket subscribed to the
RTMGRP_IPV4_IFADDR multicast group: when RTM_NEWADDR/RTM_DELADDR events of a watched interface arrive it
drains them all, dumps the addresses again (simpler and safer than patching a map from single events:
secondary promotion, flushes, ENOBUFS overruns) and hands the new map to the event loop with
`call_soon_threadsafe`. On the loop, `InterfaceAddresses` records it and the daemon rebinds the changed
listeners; Metadata reads the advertised address from it on every request, so DHCP renumbering needs no
restart.

Why a thread: pyroute2's synchronous API runs an asyncio loop of its own per call, which cannot run
inside the broker's loop. Why a plain socket for the subscription rather than `IPRoute.bind()` + `get()`:
pyroute2 reads datagrams into an internal queue, so select() on its fd can sleep while an event is
already buffered inside it; with our own socket, "drain, then dump" guarantees the last dump follows the
last event. The thread waits in select() on that socket and a wake-up pipe, so `stop()` ends it at once.
pyroute2 is imported only when an interface listener exists (`kafkad[netlink]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import os
import select
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkad.config.defs import ListenerSpec

log = logging.getLogger(__name__)

AddressMap = dict[str, str | None]  # interface name -> primary IPv4 address (None: it has none)

NETLINK_ROUTE = 0
RTMGRP_IPV4_IFADDR = 0x10
RTM_NEWADDR = 20
RTM_DELADDR = 21
IFA_F_SECONDARY = 0x01
_NLMSGHDR = struct.Struct("=IHHII")  # length, type, flags, seq, pid
_IFADDRMSG = struct.Struct("=BBBBI")  # family, prefixlen, flags, scope, index


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def interface_names() -> set[str]:
    """Interfaces of this network namespace."""
    return {name for _index, name in socket.if_nameindex()}


def interface_hosts(specs: Iterable[ListenerSpec], known: set[str] | None = None) -> tuple[str, ...]:
    """The listener hosts that name an interface (in first-seen order). Hostnames and IPs are not."""
    names = interface_names() if known is None else known
    out: list[str] = []
    for spec in specs:
        host = spec.host
        if host and not is_ip_literal(host) and host in names and host not in out:
            out.append(host)
    return tuple(out)


def _iproute() -> Any:
    try:
        from pyroute2 import IPRoute
    except ImportError as e:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "a listener names a network interface, which needs pyroute2: install kafkad[netlink]"
        ) from e
    return IPRoute()


def _dump(ipr: Any, ifnames: Iterable[str]) -> AddressMap:
    """One RTM_GETADDR dump: each interface's primary IPv4 address (secondaries only if no primary)."""
    index: dict[int, str] = {}
    for name in ifnames:
        with contextlib.suppress(OSError):  # an interface that is gone has no address
            index[socket.if_nametoindex(name)] = name
    found: dict[str, list[tuple[bool, str]]] = {}
    for msg in ipr.addr("dump", family=socket.AF_INET):
        ifname = index.get(int(msg["index"]))
        address = msg.get_attr("IFA_LOCAL") or msg.get_attr("IFA_ADDRESS")
        if ifname is None or not address:
            continue
        found.setdefault(ifname, []).append((bool(int(msg["flags"]) & IFA_F_SECONDARY), str(address)))
    return {name: (min(found[name])[1] if name in found else None) for name in ifnames}


def resolve_ipv4(ifnames: Iterable[str]) -> AddressMap:
    """Blocking: call in executor. The current primary IPv4 address of each interface."""
    ipr = _iproute()
    try:
        return _dump(ipr, list(ifnames))
    finally:
        ipr.close()


class InterfaceAddresses:
    """Loop-owned: the current address of each watched interface, and the last one it had."""

    def __init__(self, initial: Mapping[str, str | None]) -> None:
        self._current: AddressMap = dict(initial)
        self._last: dict[str, str] = {k: v for k, v in initial.items() if v}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._current)

    def get(self, ifname: str) -> str | None:
        return self._current.get(ifname)

    def bind_host(self, host: str) -> str | None:
        """Where to bind a listener's host: its interface's address (None: none yet), else the host."""
        if host in self._current:
            return self._current[host]
        return host

    def advertise(self, host: str) -> str:
        """What Metadata names: the interface's address, or the last one it had while it has none."""
        if host in self._current:
            return self._current[host] or self._last.get(host, host)
        return host

    def update(self, new: Mapping[str, str | None]) -> AddressMap:
        """Record a fresh dump; returns the interfaces whose address changed (to their new value)."""
        changed: AddressMap = {}
        for name, address in new.items():
            if name in self._current and self._current[name] != address:
                changed[name] = address
                self._current[name] = address
                if address:
                    self._last[name] = address
        return changed


class NetlinkWatcher:
    """A reader thread on an rtnetlink socket bound to IPv4 address events; results go to the loop.

    `on_dump(map)` runs on `loop` after every event of a watched interface, and once right after the
    subscription (so a change between the start-up resolution and the subscription is not lost).
    """

    def __init__(
        self,
        ifnames: Iterable[str],
        on_dump: Callable[[AddressMap], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._names = tuple(ifnames)
        self._on_dump = on_dump
        self._loop = loop
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.events = 0  # address events seen (tests and logs)

    def start(self, timeout_s: float = 10.0) -> None:
        """Blocking: call in executor. Subscribe (in the reader thread) and return once subscribed.

        The `IPRoute` is made in the reader thread: pyroute2's sync API runs an event loop of its own,
        which must not be the broker's running loop.
        """
        subscribed = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._run, args=(subscribed, failure), name="netlink-watch", daemon=True
        )
        self._thread.start()
        if not subscribed.wait(timeout_s):
            raise RuntimeError("netlink watcher did not subscribe in time")
        if failure:
            raise RuntimeError(f"netlink watcher cannot subscribe: {failure[0]}") from failure[0]

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _post(self, dump: AddressMap) -> None:
        try:
            self._loop.call_soon_threadsafe(self._on_dump, dump)
        except RuntimeError:
            self._stopping = True  # the loop is closed: nobody listens any more

    def _run(self, subscribed: threading.Event, failure: list[BaseException]) -> None:
        try:
            sub = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_ROUTE)
        except BaseException as e:
            failure.append(e)
            subscribed.set()
            return
        ipr: Any = None
        try:
            try:
                sub.bind((0, RTMGRP_IPV4_IFADDR))
                sub.setblocking(False)
                ipr = _iproute()
            except BaseException as e:
                failure.append(e)
                return
            finally:
                subscribed.set()
            self._post(_dump(ipr, self._names))
            # poll, not select: a broker with many segments open has descriptors past 1024, where
            # select() raises ValueError and the watcher died
            poller = select.poll()
            poller.register(sub.fileno(), select.POLLIN)
            poller.register(self._wake_r, select.POLLIN)
            while not self._stopping:
                ready = {fd for fd, _ in poller.poll()}
                if self._wake_r in ready or self._stopping:
                    break
                # Drain everything queued first, then dump: an event that arrives after the drain wakes
                # select() again, so the last dump always follows the last event.
                if self._drain(sub):
                    self._post(_dump(ipr, self._names))
        except Exception:
            if not self._stopping:
                log.exception("netlink watcher failed: interface listeners no longer follow their address")
        finally:
            sub.close()
            if ipr is not None:
                ipr.close()

    def _drain(self, sub: socket.socket) -> bool:
        """Read every queued datagram; True if one touched a watched interface (or events were lost)."""
        watched: set[int] = set()
        for name in self._names:
            with contextlib.suppress(OSError):
                watched.add(socket.if_nametoindex(name))
        hit = False
        while True:
            try:
                data = sub.recv(65536)
            except BlockingIOError:
                return hit
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                hit = True  # the kernel dropped events: the dump tells the truth anyway
                continue
            for _msg_type, index in _address_events(data):
                self.events += 1
                hit = hit or index in watched or not watched


def _address_events(data: bytes) -> list[tuple[int, int]]:
    """(nlmsg type, interface index) of each RTM_NEWADDR/RTM_DELADDR in one netlink datagram."""
    out: list[tuple[int, int]] = []
    pos = 0
    while pos + _NLMSGHDR.size <= len(data):
        length, msg_type, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, pos)
        if length < _NLMSGHDR.size:
            break
        if msg_type in (RTM_NEWADDR, RTM_DELADDR) and pos + _NLMSGHDR.size + _IFADDRMSG.size <= len(data):
            _family, _prefix, _flags2, _scope, index = _IFADDRMSG.unpack_from(data, pos + _NLMSGHDR.size)
            out.append((msg_type, index))
        pos += (length + 3) & ~3  # NLMSG_ALIGN
    return out
