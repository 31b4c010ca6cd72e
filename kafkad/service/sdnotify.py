"""sd_notify(3) for a Type=notify unit: READY=1, STATUS=..., WATCHDOG=1, STOPPING=1.

How it works: systemd passes the path of an AF_UNIX datagram socket in $NOTIFY_SOCKET ('@' prefix =
abstract namespace). Each notification is one datagram of newline-separated KEY=VALUE assignments.
`Notifier` sends the datagram itself from a non-blocking socket. systemd-python's
`systemd.daemon.notify` (the C sd_notify) is used only when asked for (`use_systemd=True`): it sends in
blocking mode, and a notify socket nobody drains (its queue holds ~10 datagrams) would then freeze the
event loop on the next watchdog ping. Without
$NOTIFY_SOCKET (not under systemd) every call is a cheap no-op returning False.

Watchdog: with WatchdogSec= systemd sets $WATCHDOG_USEC (and $WATCHDOG_PID). `watchdog_interval()`
returns half of it in seconds; `run_watchdog` pings at that pace FROM the event loop, so a loop that
is stuck (blocking call, busy loop) stops pinging and systemd restarts the broker.

Runs on the event loop; `notify` never blocks (non-blocking datagram; a full queue drops the message).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

log = logging.getLogger(__name__)

SendFn = Callable[[str], bool]


class _SystemdNotify(Protocol):
    def __call__(self, status: str, unset_environment: bool = ..., pid: int = ...) -> bool: ...


def _load_systemd_notify() -> _SystemdNotify | None:
    try:
        import systemd.daemon  # optional: kafkad[systemd]
    except ImportError:
        return None
    fn: _SystemdNotify = systemd.daemon.notify
    return fn


def _socket_address(path: str) -> str | bytes:
    # '@name' is Linux's abstract namespace: a leading NUL byte instead of a filesystem path.
    if path.startswith("@"):
        return b"\0" + path[1:].encode()
    return path


class _DatagramSender:
    """The pure-socket fallback: one unconnected non-blocking AF_UNIX datagram socket, reused."""

    __slots__ = ("_address", "_sock")

    def __init__(self, path: str) -> None:
        self._address = _socket_address(path)
        self._sock: socket.socket | None = None

    def __call__(self, message: str) -> bool:
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto(message.encode(), self._address)
        except OSError as exc:
            log.warning("sd_notify %r failed: %s", message.split("\n", 1)[0], exc)
            return False
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class Notifier:
    """Notifications to the service manager; a no-op when not started by systemd.

    `use_systemd=True` requires systemd-python's blocking sd_notify; otherwise (the default) the
    built-in non-blocking socket sender is used. The environment is read once, at construction.
    """

    def __init__(self, environ: Mapping[str, str] | None = None, *, use_systemd: bool | None = None) -> None:
        env = os.environ if environ is None else environ
        self._socket_path = env.get("NOTIFY_SOCKET") or None
        self._watchdog_usec = _parse_watchdog(env)
        self._fallback: _DatagramSender | None = None
        self._send: SendFn | None = None
        if self._socket_path is None:
            self.backend = "none"
            return
        native = _load_systemd_notify() if use_systemd else None
        if use_systemd and native is None:
            raise RuntimeError("use_systemd=True but systemd-python is not installed")
        if native is not None and environ is None:
            # The C sd_notify reads $NOTIFY_SOCKET itself, so it is used only with the real environment.
            self.backend = "systemd-python"
            self._send = native
        else:
            self.backend = "socket"
            self._fallback = _DatagramSender(self._socket_path)
            self._send = self._fallback

    @property
    def enabled(self) -> bool:
        """True when there is a service manager to notify."""
        return self._send is not None

    def notify(self, *assignments: str) -> bool:
        """Send raw KEY=VALUE assignments in one datagram; True if it was handed to the socket."""
        if self._send is None:
            return False
        return self._send("\n".join(assignments))

    def ready(self, status: str | None = None) -> bool:
        """Startup finished: listeners bound, logs recovered. Also reports MAINPID."""
        extra = [f"STATUS={_one_line(status)}"] if status else []
        return self.notify("READY=1", f"MAINPID={os.getpid()}", *extra)

    def status(self, text: str) -> bool:
        """Free-form one-line status shown by `systemctl status`."""
        return self.notify(f"STATUS={_one_line(text)}")

    def watchdog(self) -> bool:
        """Keep-alive ping; must arrive within WatchdogSec."""
        return self.notify("WATCHDOG=1")

    def stopping(self, status: str | None = None) -> bool:
        """Shutdown began (flushing segments, writing checkpoints)."""
        extra = [f"STATUS={_one_line(status)}"] if status else []
        return self.notify("STOPPING=1", *extra)

    def extend_timeout(self, seconds: float) -> bool:
        """Ask for more time in the current start/stop phase (long log recovery or flush)."""
        return self.notify(f"EXTEND_TIMEOUT_USEC={int(seconds * 1_000_000)}")

    def watchdog_interval(self) -> float | None:
        """Seconds between pings (half of WATCHDOG_USEC), or None when no watchdog is armed."""
        if self._watchdog_usec is None or not self.enabled:
            return None
        return self._watchdog_usec / 2_000_000

    def close(self) -> None:
        if self._fallback is not None:
            self._fallback.close()


def _one_line(text: str) -> str:
    return text.replace("\n", " ")


def _parse_watchdog(env: Mapping[str, str]) -> int | None:
    raw = env.get("WATCHDOG_USEC")
    if not raw:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid and pid.isdigit() and int(pid) != os.getpid():
        return None  # the watchdog belongs to another process (e.g. a wrapper that exec'd us)
    try:
        usec = int(raw)
    except ValueError:
        log.warning("ignoring malformed WATCHDOG_USEC=%r", raw)
        return None
    return usec if usec > 0 else None


async def run_watchdog(
    notifier: Notifier,
    interval: float,
    *,
    healthy: Callable[[], bool] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Ping WATCHDOG=1 every `interval` seconds until cancelled.

    Pinging from the loop itself proves the loop turns. `healthy`, if given, gates each ping: an
    unhealthy broker stops pinging and systemd restarts it after WatchdogSec.
    """
    while True:
        if healthy is None or healthy():
            notifier.watchdog()
        else:
            log.warning("broker unhealthy: withholding the systemd watchdog ping")
        await sleep(interval)


def start_watchdog(
    notifier: Notifier, *, healthy: Callable[[], bool] | None = None
) -> asyncio.Task[None] | None:
    """Start `run_watchdog` on the running loop if systemd armed a watchdog; else return None.

    The caller keeps the task and cancels it at shutdown.
    """
    interval = notifier.watchdog_interval()
    if interval is None:
        return None
    return asyncio.get_running_loop().create_task(
        run_watchdog(notifier, interval, healthy=healthy), name="sd-watchdog"
    )
