"""Raw wire clients built on kafkad.protocol, so client overhead stays small next to the server's.

- `small_requests`: N asyncio connections, each with one Produce of one record in flight at a time
  (the request is encoded once; only the correlation id is patched), counting requests and latencies.
- `bulk_load`: fill partitions fast with big pre-built batches (the server patches offsets in place in its
  own copy, and baseOffset is outside the CRC, so one batch can be sent again and again).
- `fetch_all`: catch up one partition from offset 0 with Fetch v11, discarding the bytes; next offsets come
  from walking the batch headers, never from decoding records.
- `drain`: read a stream to EOF, discarding it (client of the sendfile baseline).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kafkad.protocol import ApiKey, RequestHeader, decode_response, encode_request
from kafkad.storage.records.builder import SimpleRecord, build_batch

_SIZE = struct.Struct(">i")
_CORR = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")  # at byte 23 of a batch
PRODUCE_VERSION = 8
FETCH_VERSION = 11


def make_batch(record_size: int, count: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([SimpleRecord(value=b"r" * record_size, timestamp=now) for _ in range(count)])


def produce_request(
    topic: str, partition: int, batch: bytes, acks: int = 1, correlation_id: int = 0
) -> bytes:
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    return encode_request(RequestHeader(ApiKey.PRODUCE, PRODUCE_VERSION, correlation_id, "bench"), body)


def check_produce_response(frame: bytes) -> None:
    _, body = decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, frame)
    for t in body["responses"]:
        for p in t["partition_responses"]:
            if p["error_code"]:
                raise RuntimeError(f"produce to {t['name']}/{p['index']} failed: error {p['error_code']}")


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    return await reader.readexactly(size)


@dataclass(frozen=True, slots=True)
class SmallResult:
    requests: int
    seconds: float
    latencies_us: list[float]


async def small_requests(
    host: str,
    port: int,
    topic: str,
    connections: int,
    duration_s: float,
    record_size: int,
    start: Callable[[], Awaitable[None]],
) -> SmallResult:
    """`connections` clients, each sending one 1-record Produce and awaiting its answer, repeatedly."""
    batch = make_batch(record_size, 1)
    lat: list[float] = []
    # Warm up: one checked round trip (fills the broker's caches for this partition).
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(produce_request(topic, 0, batch))
    check_produce_response(await _read_frame(reader))
    writer.close()
    loop = asyncio.get_running_loop()
    done = [loop.create_future() for _ in range(connections)]
    protos = [_PingPong(produce_request(topic, 0, batch), lat, fut) for fut in done]
    for proto in protos:
        await loop.create_connection(lambda proto=proto: proto, host, port)  # type: ignore[misc]
    await start()
    end = time.monotonic() + duration_s
    for proto in protos:
        proto.end = end
    t0 = time.monotonic()
    for proto in protos:
        proto.start()
    await asyncio.gather(*done)
    elapsed = time.monotonic() - t0
    for proto in protos:
        check_produce_response(proto.last)
    return SmallResult(sum(p.count for p in protos), elapsed, lat)


class _PingPong(asyncio.Protocol):
    """`depth` requests in flight: the next is written from the callback that completes one (no coroutine
    switch per request, so the client stays cheap). Latencies are recorded only at depth 1."""

    def __init__(self, request: bytes, lat: list[float], done: asyncio.Future[None], depth: int = 1) -> None:
        self.req = bytearray(request)
        self.end = 0.0
        self.lat = lat
        self.done = done
        self.depth = depth
        self.outstanding = 0
        self.buf = bytearray()
        self.count = 0
        self.corr = 0
        self.sent_ns = 0
        self.last = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        for _ in range(self.depth):
            self.fire()

    def fire(self) -> None:
        self.corr += 1
        _CORR.pack_into(self.req, 8, self.corr)
        self.sent_ns = time.perf_counter_ns()
        self.outstanding += 1
        assert self.transport is not None
        self.transport.write(self.req)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        pos = 0
        n = len(self.buf)
        while n - pos >= 4:
            size = _SIZE.unpack_from(self.buf, pos)[0]
            if n - pos - 4 < size:
                break
            if self.depth == 1:
                self.lat.append((time.perf_counter_ns() - self.sent_ns) / 1000)
            self.count += 1
            self.outstanding -= 1
            self.last = bytes(self.buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            if time.monotonic() < self.end:
                self.fire()
        del self.buf[:pos]
        if self.outstanding == 0:
            assert self.transport is not None
            self.transport.close()
            if not self.done.done():
                self.done.set_result(None)


async def pipelined_produce(
    host: str,
    port: int,
    topic: str,
    connections: int,
    duration_s: float,
    batch: bytes,
    acks: int,
    start: Callable[[], Awaitable[None]],
    depth: int = 5,
) -> tuple[int, float]:
    """Pre-built batches over `connections` connections, `depth` Produce requests in flight on each (what
    librdkafka does at best, minus its per-record cost). Returns (requests answered, seconds)."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(produce_request(topic, 0, batch, acks))
    check_produce_response(await _read_frame(reader))
    writer.close()
    loop = asyncio.get_running_loop()
    done = [loop.create_future() for _ in range(connections)]
    protos = [_PingPong(produce_request(topic, 0, batch, acks), [], fut, depth) for fut in done]
    for proto in protos:
        await loop.create_connection(lambda proto=proto: proto, host, port)  # type: ignore[misc]
    await start()
    t0 = time.monotonic()
    for proto in protos:
        proto.end = t0 + duration_s
        proto.start()
    await asyncio.gather(*done)
    elapsed = time.monotonic() - t0
    for proto in protos:
        check_produce_response(proto.last)
    return sum(p.count for p in protos), elapsed


async def bulk_load(
    host: str,
    port: int,
    topic: str,
    partitions: int,
    total_bytes: int,
    record_size: int,
    batch_bytes: int = 1 << 20,
) -> int:
    """Append about `total_bytes` of `record_size` records round-robin over partitions; returns records sent."""
    per_batch = max(1, batch_bytes // (record_size + 10))
    batch = make_batch(record_size, per_batch)
    reqs = [produce_request(topic, p, batch) for p in range(partitions)]
    reader, writer = await asyncio.open_connection(host, port)
    n_batches = max(partitions, total_bytes // len(batch))
    inflight = 8
    sent = 0
    while sent < n_batches:
        k = min(inflight, n_batches - sent)
        for j in range(k):
            writer.write(reqs[(sent + j) % partitions])
        for _ in range(k):
            check_produce_response(await _read_frame(reader))
        sent += k
    writer.close()
    return sent * per_batch


def _recv_exact(sock: socket.socket, buf: bytearray, n: int) -> memoryview:
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        r = sock.recv_into(view[got:], n - got)
        if r == 0:
            raise ConnectionError("server closed the connection")
        got += r
    return view


def next_offset(records: memoryview | bytes, current: int) -> int:
    """The offset after the last complete batch in a Fetch records blob."""
    pos = 0
    n = len(records)
    nxt = current
    while pos + 27 <= n:
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        if pos + 12 + length > n:
            break
        nxt = base + _LAST_DELTA.unpack_from(records, pos + 23)[0] + 1
        pos += 12 + length
    return nxt


def fetch_all(
    host: str, port: int, topic: str, end_offset: int, max_bytes: int = 8 << 20
) -> tuple[int, float]:
    """Fetch partition 0 from 0 to `end_offset`; returns (record bytes received, seconds)."""
    sock = socket.create_connection((host, port))
    buf = bytearray(max_bytes + (1 << 20))
    offset = 0
    total = 0
    corr = 0
    t0 = time.monotonic()
    while offset < end_offset:
        corr += 1
        body = {
            "replica_id": -1,
            "max_wait_ms": 500,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        sock.sendall(encode_request(RequestHeader(ApiKey.FETCH, FETCH_VERSION, corr, "bench"), body))
        size = _SIZE.unpack(bytes(_recv_exact(sock, buf, 4)))[0]
        if size > len(buf):
            buf = bytearray(size)
        frame = _recv_exact(sock, buf, size)
        _, resp = decode_response(ApiKey.FETCH, FETCH_VERSION, frame)
        part = resp["responses"][0]["partitions"][0]
        if part["error_code"]:
            raise RuntimeError(f"fetch failed: error {part['error_code']}")
        records = part["records"]
        if records is None or len(records) == 0:
            continue
        total += len(records)
        offset = next_offset(records, offset)
    elapsed = time.monotonic() - t0
    sock.close()
    return total, elapsed


def drain(host: str, port: int) -> tuple[int, float]:
    """Read a stream to EOF; returns (bytes, seconds)."""
    sock = socket.create_connection((host, port))
    buf = bytearray(1 << 20)
    total = 0
    t0 = time.monotonic()
    while True:
        r = sock.recv_into(buf)
        if r == 0:
            break
        total += r
    elapsed = time.monotonic() - t0
    sock.close()
    return total, elapsed
