"""ScratchFrameReader cuts the same frames out of a byte stream as FrameReader, however the reads split it.

Reads are delivered as uvloop does them: into whatever get_buffer hands out (the scratch, or the rest of a
large body), at most a given number of bytes each. Small scratch and direct thresholds make every path run
on small frames: several frames in one read, a size prefix split over reads, a body begun in the scratch
and finished in it or in place.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkad.client import MAX_RESPONSE_BYTES, ScratchFrameReader
from kafkad.protocol import ProtocolDecodeError


def _stream(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def _read_all(reader: ScratchFrameReader, stream: bytes, reads: list[int]) -> tuple[list[bytes], int]:
    """(frames, number of reads); read sizes cycle through `reads`."""
    out: list[bytes] = []
    pos = count = 0
    while pos < len(stream):
        buf = reader.get_buffer(-1)
        n = min(len(buf), reads[count % len(reads)], len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        del buf  # the loop releases its view before buffer_updated
        pos += n
        count += 1
        out.extend(bytes(f) for f in reader.buffer_updated(n))
    return out, count


@settings(max_examples=300, deadline=None)
@given(
    frames=st.lists(
        st.integers(0, 300).flatmap(lambda n: st.binary(min_size=4 + n, max_size=4 + n)), max_size=12
    ),
    reads=st.lists(st.integers(1, 700), min_size=1, max_size=5),
    scratch=st.integers(1, 200),
    direct_min=st.integers(1, 200),
)
def test_frames_come_out_whole_and_in_order_at_any_split(
    frames: list[bytes], reads: list[int], scratch: int, direct_min: int
) -> None:
    reader = ScratchFrameReader(scratch, direct_min)
    got, _ = _read_all(reader, _stream(frames), reads)
    assert got == frames


def test_a_response_arrives_in_one_read_with_the_ones_behind_it() -> None:
    frames = [bytes(range(200)) * 80, b"\0\0\0\1tail", b"abcd"]  # 16000, 8, 4 bytes
    reader = ScratchFrameReader()
    got, reads = _read_all(reader, _stream(frames), [1 << 20])
    assert got == frames and reads == 1


def test_a_large_body_is_read_in_place_past_the_scratch() -> None:
    big = bytes(range(256)) * 4096  # 1 MiB
    reader = ScratchFrameReader(64 << 10, 64 << 10)
    buf = reader.get_buffer()
    stream = _stream([big])
    buf[:] = stream[: len(buf)]
    assert reader.buffer_updated(len(buf)) == []
    rest = reader.get_buffer()
    assert len(rest) == len(stream) - len(buf)  # the body's own remaining bytes, not the scratch
    rest[:] = stream[len(buf) :]
    del rest
    assert [bytes(f) for f in reader.buffer_updated(len(stream) - len(buf))] == [big]


@pytest.mark.parametrize("size", [-1, 3, MAX_RESPONSE_BYTES + 1])
@pytest.mark.parametrize("split", [0, 2])
def test_sizes_out_of_range_are_refused(size: int, split: int) -> None:
    reader = ScratchFrameReader()
    stream = _stream([b"\0\0\0\1"]) + struct.pack(">i", size) + b"\0" * 8
    buf = reader.get_buffer()
    first = len(stream) - 8 - (4 - split if split else 0)
    buf[:first] = stream[:first]
    with pytest.raises(ProtocolDecodeError):
        reader.buffer_updated(first)
        buf[: len(stream) - first] = stream[first:]
        reader.buffer_updated(len(stream) - first)
