"""Small Fetch responses leave in one write; large ones keep sendfile (kafkad/api/fetch.py, issue 21 item 6).

A tailing consumer's response (a few hundred bytes) is read from the page cache into the response, so the
encoder produces only bytes (the connection then sends it in one write instead of write + sendfile +
write); a catch-up read above INLINE_MAX keeps its FileSlices for sendfile. Both encode to the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkad.api import fetch
from kafkad.protocol import RequestHeader, encode_response, encode_response_bytes
from kafkad.storage.file_slice import FileSlice
from tests.unit.daemon.test_handlers import batch, call, create, fetch_body, make_broker, produce

HEADER = RequestHeader(1, 12, 7, "c")


def _as_sent(chunks: list[Any]) -> bytes:
    """What the connection puts on the wire for these chunks (FileSlices read as sendfile would)."""
    return b"".join(c.read() if isinstance(c, FileSlice) else bytes(c) for c in chunks)


def test_small_tail_fetch_is_encoded_as_bytes_only(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    produce(b, 8, 1, batch(b"a" * 100))
    produce(b, 8, 1, batch(b"b" * 100))
    out = call(b, 1, 12, fetch_body("t", 1))
    records = out["responses"][0]["partitions"][0]["records"]
    assert records and all(isinstance(r, bytes) for r in records)
    wire = encode_response_bytes(HEADER, out)  # raises if any chunk is still a FileSlice
    # The same bytes a FileSlice response would send.
    part = b.replicas.get_or_raise("t", 0)
    slices = list(part.read_records(1, 1 << 20, min_one_batch=True, committed_only=True).slices)
    assert all(isinstance(s, FileSlice) for s in slices)
    out["responses"][0]["partitions"][0]["records"] = slices
    assert _as_sent(encode_response(HEADER, out)) == wire
    assert b"b" * 100 in wire and b"a" * 100 not in wire


def test_large_fetch_keeps_file_slices_for_sendfile(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    produce(b, 8, 1, batch(b"x" * (fetch.INLINE_MAX + 1)))
    out = call(b, 1, 12, fetch_body("t", 0))
    records = out["responses"][0]["partitions"][0]["records"]
    assert records and all(isinstance(r, FileSlice) for r in records)
    assert any(isinstance(c, FileSlice) for c in encode_response(HEADER, out))
