"""A bare TCP client speaking length-prefixed Kafka frames, for protocol-level integration tests."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafkad.protocol import RequestHeader, decode_response, encode_request


class Raw:
    """A bare TCP client speaking length-prefixed frames."""

    def __init__(self, port: int) -> None:
        # Generous: a loaded machine can be slow, a wedged broker still fails the test.
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.corr = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.corr += 1
        header = RequestHeader(api_key, version, self.corr, "raw-test")
        self.sock.sendall(encode_request(header, body))
        corr, out = decode_response(api_key, version, self.recv_frame())
        assert corr == self.corr
        return out

    def is_closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()
