"""A do-nothing Kafka "broker": the baseline the produce benchmarks compare kafkad against.

How it works: a uvloop server that frames requests, decodes them with kafkad.protocol, and answers
ApiVersions (ApiVersions, Metadata, Produce only), Metadata (this node leads every partition; a topic
named `..._p<N>` has N partitions, any other topic 1) and Produce (every partition accepted, base offsets
counted per partition). Produce record bytes are appended to one file with os.write and nothing else:
no validation, no index, no flush. acks=0 requests get no answer, as in Kafka.

Run: python -m tests.bench.sink --port P --file F   (prints "ready" on stdout once listening)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import struct
import sys
from typing import Any

import uvloop

from kafkad.protocol import (
    ApiKey,
    Request,
    decode_request,
    encode_response_bytes,
)

_SIZE = struct.Struct(">i")
# The file is emptied each time it reaches this size (O_APPEND writes go on at the new end): a quick run
# appended tens of GB, and appends to a page-cache file cost the same at any size.
_WRAP_BYTES = 1 << 30
_PARTITIONS_RE = re.compile(r"_p(\d+)$")
_VERSIONS = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 8), ApiKey.PRODUCE: (0, 8)}


def partitions_of(topic: str) -> int:
    """How many partitions the sink claims a topic has (`name_p100` -> 100)."""
    m = _PARTITIONS_RE.search(topic)
    return int(m.group(1)) if m else 1


class Sink:
    """The state shared by every connection: the output file and per-partition next offsets."""

    def __init__(self, fd: int, host: str, port: int) -> None:
        self.fd = fd
        self.written = 0  # bytes in the file since it was last emptied
        self.host = host
        self.port = port
        self.offsets: dict[tuple[str, int], int] = {}
        self.topics: set[str] = set()

    def answer(self, req: Request) -> bytes | None:
        key = req.header.api_key
        if key == ApiKey.API_VERSIONS:
            keys = [
                {"api_key": int(k), "min_version": lo, "max_version": hi} for k, (lo, hi) in _VERSIONS.items()
            ]
            return encode_response_bytes(req.header, {"error_code": 0, "api_keys": keys})
        if key == ApiKey.METADATA:
            return encode_response_bytes(req.header, self._metadata(req.body))
        if key == ApiKey.PRODUCE:
            body = self._produce(req.body)
            return None if req.body["acks"] == 0 else encode_response_bytes(req.header, body)
        raise ValueError(f"sink does not speak api {key}")

    def _metadata(self, body: dict[str, Any]) -> dict[str, Any]:
        # A null topic list means "all topics": answer with every topic seen so far, as a broker would.
        names = [t["name"] for t in body["topics"]] if body["topics"] is not None else sorted(self.topics)
        self.topics.update(names)
        topics = [
            {
                "error_code": 0,
                "name": name,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": i,
                        "leader_id": 0,
                        "replica_nodes": [0],
                        "isr_nodes": [0],
                    }
                    for i in range(partitions_of(name))
                ],
            }
            for name in names
        ]
        brokers = [{"node_id": 0, "host": self.host, "port": self.port}]
        return {"brokers": brokers, "cluster_id": "sink", "controller_id": 0, "topics": topics}

    def _produce(self, body: dict[str, Any]) -> dict[str, Any]:
        responses = []
        for topic in body["topic_data"]:
            parts = []
            for pd in topic["partition_data"]:
                records = pd["records"]
                key = (topic["name"], pd["index"])
                base = self.offsets.get(key, 0)
                if records is not None:
                    self.written += os.write(self.fd, records)
                    if self.written > _WRAP_BYTES:  # keep the disk from filling on long runs
                        os.ftruncate(self.fd, 0)
                        self.written = 0
                    # Count records from the batch header (recordCount at byte 57) to keep offsets honest.
                    self.offsets[key] = base + struct.unpack_from(">i", records, 57)[0]
                parts.append({"index": pd["index"], "error_code": 0, "base_offset": base})
            responses.append({"name": topic["name"], "partition_responses": parts})
        return {"responses": responses}


class SinkProtocol(asyncio.BufferedProtocol):
    """Frames requests straight out of a receive buffer; answers in order (one task-free path)."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.buf = bytearray(128 << 10)  # grows (doubling) only for connections that send big frames
        self.view = memoryview(self.buf)
        self.fill = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is not a subclass

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buf) - self.fill < 65536:
            # A new, doubled buffer: the old one cannot be resized while memoryviews of it exist.
            bigger = bytearray(2 * len(self.buf))
            bigger[: self.fill] = self.view[: self.fill]
            self.buf = bigger
            self.view = memoryview(bigger)
        return self.view[self.fill :]

    def buffer_updated(self, nbytes: int) -> None:
        self.fill += nbytes
        pos = 0
        out: list[bytes] = []
        while self.fill - pos >= 4:
            size = _SIZE.unpack_from(self.buf, pos)[0]
            if self.fill - pos - 4 < size:
                break
            frame = bytearray(self.view[pos + 4 : pos + 4 + size])
            pos += 4 + size
            reply = self.sink.answer(decode_request(frame))
            if reply is not None:
                out.append(reply)
        if pos:
            self.view[: self.fill - pos] = self.view[pos : self.fill]
            self.fill -= pos
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


async def serve(host: str, port: int, path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    sink = Sink(fd, host, port)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SinkProtocol(sink), host, port, backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--file", required=True)
    a = p.parse_args(argv)
    try:
        uvloop.run(serve(a.host, a.port, a.file))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
