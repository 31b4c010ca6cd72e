"""Listeners on IP literals are bound without a name lookup (kafkad/network/server.py, issue 21 item 3).

uvloop's create_server encodes a host with the idna codec (~0.65 MB of imports an idle broker keeps);
_literal_socket binds literals itself as create_server would, and leaves names to create_server.
"""

from __future__ import annotations

import errno
import socket

import pytest

from kafkad.network.server import _literal_socket


def test_ipv4_literal_is_bound_with_reuseaddr() -> None:
    sock = _literal_socket("127.0.0.1", 0)
    assert sock is not None
    with sock:
        host, port = sock.getsockname()
        assert host == "127.0.0.1" and port > 0
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)


def test_ipv6_literal_is_v6only() -> None:
    if not socket.has_ipv6:
        pytest.fail("this machine's Python has no IPv6: the IPv6 path cannot be checked")
    try:
        sock = _literal_socket("::1", 0)
    except OSError as e:  # a kernel without IPv6 loopback cannot run this case at all
        pytest.fail(f"cannot bind ::1 here: {e}")
    assert sock is not None
    with sock:
        assert sock.family == socket.AF_INET6
        assert sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1


def test_names_are_left_to_create_server() -> None:
    assert _literal_socket("localhost", 0) is None


def test_taken_port_is_reported_as_asyncio_words_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError) as info:
            _literal_socket("127.0.0.1", port)
    assert info.value.errno == errno.EADDRINUSE
    assert "address already in use" in str(info.value)
