"""Decompression is bounded: real bombs (zeros compressed by each codec, built by streaming compressors
so the test itself stays small) fail with DecompressedSizeExceeded (CORRUPT_MESSAGE) without
materializing more than the limit, at every place that decompresses client data: the codecs, the
compacted-topic key check, decode_batch, the log cleaner (batch kept as is) and the offsets replay.

Peak memory is measured in a fresh interpreter (ru_maxrss covers cramjam's own allocations, which
tracemalloc cannot see): a 128 MiB bomb against a 4 MiB limit must not move the peak by anything near
the expanded size.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import cramjam
import pytest
from crc32c import crc32c

from kafkad.clock import ManualClock
from kafkad.coordinator.group import log_store
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage import cleaner_rewrite
from kafkad.storage.cleaner_rewrite import Piece, RewriteRules, build_offset_map, filter_batch
from kafkad.storage.records import (
    BATCH_OVERHEAD,
    MAX_DECOMPRESSED_BYTES,
    Compression,
    DecompressedSizeExceeded,
    SimpleRecord,
    build_batch,
    compress,
    decode_batch,
    decompress,
    iter_headers,
    read_header,
)
from kafkad.storage.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_STRUCT, LOG_OVERHEAD
from kafkad.storage.records.codecs import XERIAL_MAGIC, xerial_compress
from kafkad.storage.records.key_check import first_null_key, null_key_indexes
from tests.unit.storage.test_cleaner_support import cleaner_for, keyed, open_compacted, produce

MiB = 1 << 20
LIMIT = MiB
_CHUNK = bytes(MiB)


def _streamed(compressor: object, size: int) -> bytes:
    """`size` zeros through a cramjam streaming Compressor, 1 MiB at a time (no content size)."""
    for _ in range(size // MiB):
        compressor.compress(_CHUNK)  # type: ignore[attr-defined]
    return bytes(compressor.finish())  # type: ignore[attr-defined]


def gzip_bomb(size: int) -> bytes:
    """Members of 1 MiB of zeros back to back: ISIZE (the last member's) understates the total, so the
    decoder really runs into the limit."""
    return zlib.compress(_CHUNK, wbits=31) * (size // MiB)  # wbits 31: gzip members


def gzip_declared_bomb(size: int) -> bytes:
    """One member: its ISIZE trailer declares the size, refused before decoding anything."""
    return zlib.compress(bytes(size), wbits=31)


def zstd_bomb(size: int) -> bytes:
    return _streamed(cramjam.zstd.Compressor(), size)


def zstd_sized_bomb(size: int) -> bytes:
    """A one-shot zstd frame: it declares its content size, refused before decoding anything."""
    return bytes(cramjam.zstd.compress(bytes(size)))


def lz4_bomb(size: int) -> bytes:
    return _streamed(cramjam.lz4.Compressor(), size)


def snappy_bomb(size: int) -> bytes:
    return bytes(cramjam.snappy.compress_raw(bytes(size)))


def xerial_bomb(size: int) -> bytes:
    """snappy-java framing: one 32 KiB block of zeros repeated, so any size costs ~1.6 KiB per MiB."""
    block = xerial_compress(bytes(32 * 1024))[len(XERIAL_MAGIC) + 8 :]
    return xerial_compress(b"")[: len(XERIAL_MAGIC) + 8] + block * (size // (32 * 1024))


BOMBS: dict[str, tuple[Compression, Callable[[int], bytes]]] = {
    "gzip": (Compression.GZIP, gzip_bomb),
    "gzip-declared": (Compression.GZIP, gzip_declared_bomb),
    "zstd-streamed": (Compression.ZSTD, zstd_bomb),
    "zstd-sized": (Compression.ZSTD, zstd_sized_bomb),
    "lz4": (Compression.LZ4, lz4_bomb),
    "snappy-raw": (Compression.SNAPPY, snappy_bomb),
    "snappy-xerial": (Compression.SNAPPY, xerial_bomb),
}


def bomb_batch(codec: Compression, blob: bytes, records: int = 1000) -> bytes:
    """A well-formed v2 batch (valid CRC) whose records blob is `blob`."""
    size = BATCH_OVERHEAD + len(blob)
    out = bytearray(size)
    HEADER_STRUCT.pack_into(
        out, 0, 0, size - LOG_OVERHEAD, -1, 2, 0, int(codec), records - 1, 0, 0, -1, -1, -1, records
    )
    out[BATCH_OVERHEAD:] = blob
    out[CRC_OFFSET : CRC_OFFSET + 4] = crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
    return bytes(out)


def test_the_default_limit_is_64_mib() -> None:
    assert 64 * MiB == MAX_DECOMPRESSED_BYTES


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_fails_with_corrupt_message(name: str) -> None:
    codec, make = BOMBS[name]
    blob = make(8 * LIMIT)
    assert len(blob) < LIMIT  # it is a bomb: small on the wire
    with pytest.raises(DecompressedSizeExceeded) as info:
        decompress(codec, blob, LIMIT)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE
    assert f"more than {LIMIT} bytes" in info.value.message


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_output_of_exactly_the_limit_is_accepted_one_more_byte_is_not(name: str) -> None:
    codec, _ = BOMBS[name]
    data = os.urandom(1000) * 300  # compressible, but not one long run
    blob = xerial_compress(data) if name == "snappy-xerial" else _compress(name, data)
    assert decompress(codec, blob, len(data)) == data
    with pytest.raises(DecompressedSizeExceeded):
        decompress(codec, blob, len(data) - 1)


def _compress(name: str, data: bytes) -> bytes:
    if name == "zstd-streamed":
        c = cramjam.zstd.Compressor()
        c.compress(data)
        return bytes(c.finish())
    if name == "lz4":
        c4 = cramjam.lz4.Compressor()
        c4.compress(data)
        return bytes(c4.finish())
    if name.startswith("gzip"):
        return zlib.compress(data, wbits=31)
    return compress(BOMBS[name][0], data)


def test_growing_output_buffer_reaches_sizes_far_above_the_first_guess() -> None:
    """A 4 KiB zstd frame without a content size holding 8 MiB: the buffer doubles until it fits."""
    blob = zstd_bomb(8 * MiB)
    assert decompress(Compression.ZSTD, blob, 8 * MiB) == bytes(8 * MiB)


def test_a_gzip_whose_last_member_understates_the_size_is_still_bounded() -> None:
    """ISIZE is only the last member's: a tiny member after a bomb must not let the bomb through."""
    blob = gzip_bomb(8 * LIMIT) + zlib.compress(b"tiny", wbits=31)
    with pytest.raises(DecompressedSizeExceeded):
        decompress(Compression.GZIP, blob, LIMIT)
    assert decompress(Compression.GZIP, blob, 8 * LIMIT + 4) == bytes(8 * LIMIT) + b"tiny"


def test_corrupt_data_is_still_corrupt_message_not_a_size_error() -> None:
    for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD, Compression.SNAPPY):
        with pytest.raises(KafkaError) as info:
            decompress(codec, b"\x00garbage that is not compressed" * 10, LIMIT)
        assert info.value.code is ErrorCode.CORRUPT_MESSAGE
        assert not isinstance(info.value, DecompressedSizeExceeded)


@pytest.mark.parametrize("name", ["gzip", "zstd-streamed", "zstd-sized", "lz4", "snappy-xerial"])
def test_key_check_and_decode_refuse_a_bomb_batch(name: str) -> None:
    codec, make = BOMBS[name]
    batch = bomb_batch(codec, make(8 * LIMIT))
    for check in (first_null_key, null_key_indexes):
        with pytest.raises(DecompressedSizeExceeded) as info:
            check(batch, 0, LIMIT)
        assert info.value.code is ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(DecompressedSizeExceeded):
        decode_batch(batch, max_size=LIMIT)


def test_key_check_of_a_real_compressed_batch_is_unchanged() -> None:
    records = [SimpleRecord(b"k", b"v" * 100, timestamp=1), SimpleRecord(None, b"x", timestamp=1)]
    batch = build_batch(records, compression=Compression.ZSTD)
    assert null_key_indexes(batch) == [1]
    assert first_null_key(batch, 0, LIMIT) == 1


# ---- peak memory, in a fresh interpreter ---------------------------------------------------------

_MEASURE = """
import resource, sys
from kafkad.storage.records import Compression, DecompressedSizeExceeded, decompress
blob = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    decompress(Compression[sys.argv[2]], blob, int(sys.argv[3]))
    print("no error")
except DecompressedSizeExceeded:
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


@pytest.mark.parametrize("name", ["gzip", "zstd-streamed", "lz4", "snappy-xerial"])
def test_peak_memory_stays_near_the_limit_not_the_expanded_size(name: str, tmp_path: Path) -> None:
    codec, make = BOMBS[name]
    expanded, limit = 128 * MiB, 4 * MiB
    path = tmp_path / "bomb"
    path.write_bytes(make(expanded))
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), codec.name, str(limit)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    grown = int(result.stdout.strip())  # ValueError on "no error"
    # One output buffer of at most `limit` plus decoder state; 128 MiB if it were decompressed whole.
    assert grown < 4 * limit + 16 * MiB, f"peak RSS grew by {grown} bytes"


# ---- the log cleaner and the offsets replay ------------------------------------------------------


def _rules() -> RewriteRules:
    return RewriteRules(now_ms=0, delete_retention_ms=0, index_interval_bytes=4096, index_bytes=1 << 20)


def test_cleaner_keeps_an_undecodable_batch_byte_for_byte(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(cleaner_rewrite, "decompress", functools.partial(decompress, max_size=LIMIT))
    batch = bomb_batch(Compression.ZSTD, zstd_bomb(8 * LIMIT))
    header = read_header(batch)
    with caplog.at_level(logging.WARNING, logger="kafkad.storage.cleaner_rewrite"):
        new, kept, horizon = filter_batch(header, memoryview(batch), {b"k": 10**9}, _rules())
    assert new is not None and bytes(new) == batch
    assert (kept, horizon) == (1000, None)
    assert "cannot be decoded, kept as is" in caplog.text


def test_offset_map_skips_an_undecodable_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleaner_rewrite, "decompress", functools.partial(decompress, max_size=LIMIT))
    good = build_batch([SimpleRecord(b"a", b"1", timestamp=1)], base_offset=1000)
    data = bomb_batch(Compression.GZIP, gzip_bomb(8 * LIMIT)) + good
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        piece = Piece(None, fd, 0, 1001, len(data), 0)
        result = build_offset_map([piece], 100)
    finally:
        os.close(fd)
    assert result.offsets == {b"a": 1000}
    assert result.end_offset == 1001


@dataclass(frozen=True, slots=True)
class _Slice:
    data: bytes

    def read(self) -> bytes:
        return self.data


@dataclass(frozen=True, slots=True)
class _Read:
    slices: list[_Slice]


@dataclass(frozen=True, slots=True)
class _Log:
    data: bytes

    def read(self, offset: int, max_bytes: int, **_: object) -> _Read:
        return _Read([_Slice(self.data)] if offset == 0 else [])


@dataclass(frozen=True, slots=True)
class _Partition:
    log: _Log
    log_start_offset: int
    log_end_offset: int
    is_leader: bool = True

    def append_as_leader(self, records: memoryview, *, now_ms: int, required_acks: int) -> None:
        raise AssertionError("replay never appends")


def test_offsets_replay_skips_an_undecodable_batch_and_keeps_going(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(log_store, "decode_batch", functools.partial(decode_batch, max_size=LIMIT))
    good = build_batch([SimpleRecord(b"a", b"1", timestamp=1)], base_offset=1000)
    data = bomb_batch(Compression.LZ4, lz4_bomb(8 * LIMIT)) + good
    part = _Partition(_Log(data), 0, 1001)
    with caplog.at_level(logging.WARNING, logger="kafkad.coordinator.group.log_store"):
        replayed: Iterator[tuple[bytes, bytes | None]] = log_store.replay_partition(part)
        assert list(replayed) == [(b"a", b"1")]
    assert "offsets 0-999 cannot be decoded, skipped" in caplog.text


def test_cleaning_a_log_holding_a_bomb_compacts_around_it_and_keeps_it_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bomb can only reach a compacted log through a topic altered from delete: every pass keeps it."""
    monkeypatch.setattr(cleaner_rewrite, "decompress", functools.partial(decompress, max_size=LIMIT))
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock)
    produce(plog, clock, keyed(5, 3))
    bomb = bytearray(bomb_batch(Compression.ZSTD, zstd_bomb(8 * LIMIT)))
    plog.append(memoryview(bomb), leader_epoch=0, now_ms=clock.time_ms())
    produce(plog, clock, keyed(5, 3, tag="w"))
    plog.high_watermark = plog.log_end_offset
    plog.roll()

    def bombs() -> list[bytes]:
        data = b"".join(seg.log_path.read_bytes() for seg, _ in plog.cleanable_segments())
        return [data[h.position : h.position + h.size] for h in iter_headers(data) if h.records_count == 1000]

    [stored] = bombs()
    with caplog.at_level(logging.WARNING, logger="kafkad.storage.cleaner_rewrite"):
        stats = cleaner_for(plog, clock).clean_all_now()
    assert len(stats) == 1 and stats[0].completed
    assert bombs() == [stored]  # byte for byte, offsets included
    assert "cannot be decoded, kept as is" in caplog.text
    data = b"".join(seg.log_path.read_bytes() for seg, _ in plog.cleanable_segments())
    others = [h for h in iter_headers(data) if h.records_count != 1000]
    kept = [(r.key, r.value) for h in others for r in decode_batch(data, h.position).records]
    assert sorted(kept) == sorted((f"k{k}".encode(), f"w2-{k}".encode()) for k in range(5))
