"""Review: the per-listener receive scratch shared by every connection, over real uvloop sockets.

uvloop calls get_buffer then buffer_updated per read, and keeps the buffer exported until
buffer_updated returns. Several clients send pipelined frames of every size class (inside one read,
split across reads, bodies big enough to be received straight into themselves, bodies larger than the
scratch) at once. Half of the frames are held by the dispatcher in a suspended Task until every frame
of every client has gone through the shared scratch; their responses echo the frame as it is at that
time. Any frame left pointing into the scratch (or overwritten by another connection's read) shows up
as a wrong echo or as a stored frame that no longer equals what was received.
"""

from __future__ import annotations

import asyncio
import random
import struct
from typing import Any, cast

import uvloop

from kafkad.network.connection import KafkaConnection, ReceiveScratch
from kafkad.network.dispatcher import Dispatcher

_CLIENTS = 4
_FRAMES = 40
_DEADLINE = 120.0  # seconds: generous on a loaded 2-core machine


class _HoldingDispatcher:
    """Echoes each frame; frames starting with b"H" are answered only after `release`."""

    def __init__(self) -> None:
        self.frames: list[tuple[bytearray, bytes]] = []  # (the frame object, its bytes on arrival)
        self.release: asyncio.Future[None] | None = None
        self.all_in: asyncio.Event = asyncio.Event()
        self.expected = 0

    def dispatch(self, frame: bytearray, peer: str) -> Any:
        self.frames.append((frame, bytes(frame)))
        if len(self.frames) == self.expected:
            self.all_in.set()
        if bytes(frame[:1]) != b"H":
            return [struct.pack(">i", len(frame)) + bytes(frame)]
        release = self.release
        assert release is not None

        async def later() -> list[bytes]:
            await release
            return [struct.pack(">i", len(frame)) + bytes(frame)]  # the frame as it is now

        return asyncio.get_running_loop().create_task(later())


class _CountingConnection(KafkaConnection):
    reads = 0
    direct_reads = 0

    def get_buffer(self, sizehint: int) -> memoryview:
        buf = super().get_buffer(sizehint)
        _CountingConnection.reads += 1
        _CountingConnection.direct_reads += self._direct
        return buf


def _bodies(client: int, rng: random.Random) -> list[bytes]:
    out = []
    for j in range(_FRAMES):
        size = rng.choice(
            (rng.randrange(0, 200), rng.randrange(1000, 20_000), rng.randrange(70_000, 300_000))
        )
        tag = (b"H" if j % 2 else b"N") + struct.pack(">hh", client, j)
        fill = bytes([(client * 31 + j * 7 + k) & 0xFF for k in range(256)])
        body = tag + (fill * (size // 256 + 1))[: max(0, size - len(tag))]
        out.append(body)
    return out


async def _scenario() -> None:
    loop = asyncio.get_running_loop()
    d = _HoldingDispatcher()
    d.release = loop.create_future()
    rng = random.Random(20261122)
    plans = [_bodies(c, rng) for c in range(_CLIENTS)]
    d.expected = sum(len(p) for p in plans)
    shared = ReceiveScratch()
    server = await loop.create_server(
        lambda: _CountingConnection(
            cast(Dispatcher, d), max_request_bytes=1 << 20, max_queued=10_000, scratch=shared
        ),
        "127.0.0.1",
        0,
    )
    port = server.sockets[0].getsockname()[1]

    async def send(plan: list[bytes]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
        for j, body in enumerate(plan):
            writer.write(struct.pack(">i", len(body)) + body)
            if j % 3 == 0:
                await writer.drain()  # let the other clients' bytes interleave in the scratch
        await writer.drain()
        return reader, writer

    try:
        streams = await asyncio.wait_for(asyncio.gather(*(send(p) for p in plans)), _DEADLINE)
        await asyncio.wait_for(d.all_in.wait(), _DEADLINE)
        d.release.set_result(None)
        for (reader, writer), plan in zip(streams, plans, strict=True):
            for body in plan:
                head = await asyncio.wait_for(reader.readexactly(4), _DEADLINE)
                echoed = await asyncio.wait_for(reader.readexactly(struct.unpack(">i", head)[0]), _DEADLINE)
                assert echoed == body, f"response to frame {body[:5]!r} differs from what was sent"
            writer.close()
    finally:
        server.close()
    for frame, on_arrival in d.frames:
        assert bytes(frame) == on_arrival  # nothing wrote into a frame after it was handed out
    assert len(d.frames) == d.expected
    assert _CountingConnection.direct_reads > 0  # the big-body path ran
    assert _CountingConnection.reads > _CountingConnection.direct_reads  # and the shared scratch


def test_frames_survive_other_connections_reads_through_the_shared_scratch() -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_scenario())
