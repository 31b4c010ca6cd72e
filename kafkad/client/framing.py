"""Request frames out, response frames in: Kafka's size-prefixed framing on the client side, sans-IO.

A request frame is a 4-byte size, the request header (api key, version, correlation id, client id; header v2
adds tagged fields for flexible versions) and the body, all from kafkad.protocol's schema codec. A caller
that encodes its own frames (the follower's Fetch encoder) leaves the correlation id at offset 8 for
`stamp_correlation` to write. A response frame is a 4-byte size and the rest, which starts with the
correlation id; `FrameReader` hands out the rest as one bytearray per frame.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

from kafkad.protocol import ProtocolDecodeError, RequestHeader, encode_request

MAX_RESPONSE_BYTES = 1 << 30  # a larger size prefix means a confused peer, not a response
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class Call(NamedTuple):
    """A request the core wants sent: api key, version and body (the shell frames it and returns the
    decoded response body)."""

    api_key: int
    api_version: int
    body: Mapping[str, Any]


def request_frame(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> bytes:
    """A whole request frame, size prefix included. Raises ProtocolError when `body` does not fit the schema."""
    return encode_request(RequestHeader(api_key, api_version, correlation_id, client_id), body)


def stamp_correlation(frame: bytearray, correlation_id: int) -> bytearray:
    """Writes `correlation_id` into an encoded request (size prefix, api key, version, then the id)."""
    _CORRELATION.pack_into(frame, 8, correlation_id)
    return frame


class FrameReader:
    """Cuts response frames out of a byte stream, reading each straight into its own bytearray.

    The shell asks `get_buffer()` for where the next bytes go (the size prefix, then the frame body: never
    past the end of the current frame), fills it (`sock.recv_into`, or asyncio.BufferedProtocol's
    get_buffer/buffer_updated pair, whose names these follow) and reports the count to `buffer_updated`,
    which returns the frame (without its size prefix) once it is whole, else None. A size below 4 (no room
    for a correlation id) or above MAX_RESPONSE_BYTES raises ProtocolDecodeError: the stream is lost.
    """

    __slots__ = ("_frame", "_head", "_pos")

    def __init__(self) -> None:
        self._head = bytearray(4)
        self._frame: bytearray | None = None
        self._pos = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        frame = self._frame
        return memoryview(self._head if frame is None else frame)[self._pos :]

    def buffer_updated(self, nbytes: int) -> bytearray | None:
        self._pos += nbytes
        frame = self._frame
        if frame is None:
            if self._pos < 4:
                return None
            size = _SIZE.unpack(self._head)[0]
            if size < 4 or size > MAX_RESPONSE_BYTES:
                raise ProtocolDecodeError(f"response size {size} out of range")
            self._frame, self._pos = bytearray(size), 0
            return None
        if self._pos == len(frame):
            self._frame, self._pos = None, 0
            return frame
        return None


class ScratchFrameReader:
    """FrameReader for a shell that reads whatever has arrived (asyncio.BufferedProtocol under uvloop):
    fewer reads per response.

    uvloop (libuv) reads into get_buffer()'s buffer until a read comes back short; FrameReader's buffers
    are exactly the 4 size bytes, then exactly the body, so every response took three recv calls (size,
    body, and one more that finds nothing). Here get_buffer hands out a scratch buffer, so one recv
    usually brings the size prefix, the body and any responses behind it, short; `buffer_updated` copies
    each whole frame out into its own bytearray (and the start of a partial one into its body) and
    returns them in order. While at least `direct_min` bytes of a body are missing, get_buffer hands out
    the rest of the body itself (a large catch-up response lands in place, with no scratch copy).
    The scratch holds nothing between reads (buffer_updated consumes it all), so the readers of one
    thread (its event loop's channels) share one: no 64 KiB per connection.
    """

    __slots__ = ("_direct", "_direct_min", "_filled", "_frame", "_head", "_scratch")

    def __init__(self, scratch_bytes: int = 64 << 10, direct_min: int = 64 << 10) -> None:
        self._scratch = _thread_scratch(scratch_bytes)
        self._direct_min = direct_min
        self._direct = False  # the last get_buffer handed out the partial body, not the scratch
        self._head = bytearray()  # size bytes of a frame split before its 4th size byte
        self._frame: bytearray | None = None  # the body being filled
        self._filled = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        frame = self._frame
        if frame is not None and len(frame) - self._filled >= self._direct_min:
            self._direct = True
            return memoryview(frame)[self._filled :]
        self._direct = False
        return self._scratch

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        """The frames (without their size prefix) completed by these `nbytes`, in order."""
        if self._direct:
            self._filled += nbytes
            frame = self._frame
            assert frame is not None
            if self._filled < len(frame):
                return []
            self._frame = None
            return [frame]
        view = self._scratch
        frames: list[bytearray] = []
        pos = 0
        frame = self._frame
        if frame is not None:  # the rest of a body begun in an earlier read
            take = min(nbytes, len(frame) - self._filled)
            frame[self._filled : self._filled + take] = view[:take]
            self._filled += take
            pos = take
            if self._filled < len(frame):
                return frames
            self._frame = None
            frames.append(frame)
        if self._head:  # a size prefix split over reads
            need = min(4 - len(self._head), nbytes - pos)
            self._head += view[pos : pos + need]
            pos += need
            if len(self._head) < 4:
                return frames
            pos = self._start(_SIZE.unpack(self._head)[0], view, pos, nbytes, frames)
            self._head.clear()
        while nbytes - pos >= 4:
            pos = self._start(_SIZE.unpack_from(view, pos)[0], view, pos + 4, nbytes, frames)
        if pos < nbytes:
            self._head += view[pos:nbytes]
        return frames

    def _start(self, size: int, view: memoryview, pos: int, end: int, frames: list[bytearray]) -> int:
        """A frame of `size` whose body starts at `pos` of the scratch's `end` bytes: whole (appended to
        `frames`) or begun (kept). Returns where the next frame starts (`end` once one is partial)."""
        if size < 4 or size > MAX_RESPONSE_BYTES:
            raise ProtocolDecodeError(f"response size {size} out of range")
        stop = pos + size
        if stop <= end:
            frames.append(bytearray(view[pos:stop]))
            return stop
        frame = self._frame = bytearray(size)
        frame[: end - pos] = view[pos:end]
        self._filled = end - pos
        return end


_SCRATCH = threading.local()  # per thread (one event loop each): `view`, the shared scratch


def _thread_scratch(size: int) -> memoryview:
    """`size` bytes of this thread's scratch (grown when a reader wants more)."""
    view: memoryview | None = getattr(_SCRATCH, "view", None)
    if view is None or len(view) < size:
        view = _SCRATCH.view = memoryview(bytearray(size))
    return view[:size]
