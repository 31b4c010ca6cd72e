"""sd_notify through a real AF_UNIX datagram socket standing in for systemd's NOTIFY_SOCKET."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkad.service.sdnotify import Notifier, run_watchdog, start_watchdog


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    yield path, sock
    sock.close()


def _recv(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


@pytest.mark.parametrize("use_systemd", [True, False])
def test_ready_status_watchdog_stopping_arrive(
    notify_socket: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch, use_systemd: bool
) -> None:
    path, sock = notify_socket
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    n = Notifier(use_systemd=use_systemd)
    assert n.backend == ("systemd-python" if use_systemd else "socket")
    assert n.ready("serving 3 partitions")
    msg = _recv(sock)
    assert msg[0] == "READY=1"
    assert f"MAINPID={os.getpid()}" in msg
    assert "STATUS=serving 3 partitions" in msg
    assert n.status("recovering\nlogs")
    assert _recv(sock) == ["STATUS=recovering logs"]
    assert n.watchdog()
    assert _recv(sock) == ["WATCHDOG=1"]
    assert n.stopping()
    assert _recv(sock) == ["STOPPING=1"]
    assert n.extend_timeout(2.5)
    assert _recv(sock) == ["EXTEND_TIMEOUT_USEC=2500000"]
    n.close()


def test_abstract_namespace_socket() -> None:
    name = f"kafkad-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.settimeout(5)
    try:
        n = Notifier({"NOTIFY_SOCKET": "@" + name})
        assert n.backend == "socket"
        assert n.watchdog()
        assert _recv(sock) == ["WATCHDOG=1"]
        n.close()
    finally:
        sock.close()


def test_without_notify_socket_everything_is_a_noop() -> None:
    n = Notifier({"WATCHDOG_USEC": "30000000"})
    assert not n.enabled
    assert n.backend == "none"
    assert n.ready() is False
    assert n.watchdog() is False
    assert n.watchdog_interval() is None


def test_missing_socket_file_reports_failure(tmp_path: Path) -> None:
    n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "absent.sock")})
    assert n.enabled
    assert n.ready() is False


def test_watchdog_interval_is_half_of_watchdog_usec() -> None:
    env = {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "30000000"}
    assert Notifier(env).watchdog_interval() == 15.0
    assert Notifier({**env, "WATCHDOG_PID": str(os.getpid())}).watchdog_interval() == 15.0
    # A watchdog armed for another process is not ours to feed.
    assert Notifier({**env, "WATCHDOG_PID": str(os.getpid() + 1)}).watchdog_interval() is None
    assert Notifier({**env, "WATCHDOG_USEC": "junk"}).watchdog_interval() is None
    assert Notifier({"NOTIFY_SOCKET": "/run/x"}).watchdog_interval() is None


def test_run_watchdog_pings_each_interval_only_while_healthy(
    notify_socket: tuple[str, socket.socket],
) -> None:
    path, sock = notify_socket
    n = Notifier({"NOTIFY_SOCKET": path})
    health = iter([True, False, True])
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run_watchdog(n, 7.5, healthy=lambda: next(health), sleep=fake_sleep))
    assert waits == [7.5, 7.5, 7.5]
    assert _recv(sock) == ["WATCHDOG=1"]
    assert _recv(sock) == ["WATCHDOG=1"]  # the unhealthy round sent nothing
    sock.settimeout(0)
    with pytest.raises(BlockingIOError):
        sock.recv(4096)


def test_start_watchdog_runs_on_the_loop_when_armed(notify_socket: tuple[str, socket.socket]) -> None:
    path, sock = notify_socket

    async def main() -> None:
        assert start_watchdog(Notifier({"NOTIFY_SOCKET": path})) is None  # not armed
        task = start_watchdog(Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "20000000"}))
        assert task is not None
        await asyncio.sleep(0)  # one loop turn: the first ping goes out immediately
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _recv(sock) == ["WATCHDOG=1"]
