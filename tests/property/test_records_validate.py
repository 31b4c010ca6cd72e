"""Properties of validation, patching and recovery scans on real built batches."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records import (
    Compression,
    SimpleRecord,
    build_batch,
    patch_offset_and_epoch,
    scan_valid_prefix,
    validate_client_batches,
)


def _segment(counts: list[int], codecs: list[Compression]) -> tuple[bytearray, list[int]]:
    """Batches with consecutive offsets; returns the buffer and each batch's end position."""
    buf = bytearray()
    ends = []
    offset = 0
    for i, count in enumerate(counts):
        items = [SimpleRecord(b"k", b"v%d" % j, (("h", b"x"),), 1000 + j) for j in range(count)]
        buf += build_batch(items, compression=codecs[i % len(codecs)], base_offset=offset)
        offset += count
        ends.append(len(buf))
    return buf, ends


segments = st.tuples(
    st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=6),
    st.lists(st.sampled_from(Compression), min_size=1, max_size=3),
)


@settings(max_examples=100, deadline=None)
@given(
    seg=segments,
    offsets=st.lists(st.integers(min_value=0, max_value=(1 << 62)), min_size=6, max_size=6),
    epoch=st.integers(min_value=-1, max_value=0x7FFFFFFF),
)
def test_patching_keeps_crc_valid(
    seg: tuple[list[int], list[Compression]], offsets: list[int], epoch: int
) -> None:
    buf, _ = _segment(*seg)
    view = memoryview(buf)
    headers = validate_client_batches(view)
    for header, base in zip(headers, offsets, strict=False):
        patch_offset_and_epoch(view, header.position, base, epoch)
    patched = validate_client_batches(view)
    assert [h.base_offset for h in patched] == offsets[: len(patched)]
    assert {h.partition_leader_epoch for h in patched} == {epoch}
    assert [h.crc for h in patched] == [h.crc for h in headers]


@settings(max_examples=200, deadline=None)
@given(seg=segments, where=st.floats(min_value=0, max_value=1, exclude_max=True), data=st.data())
def test_any_byte_flip_in_crc_region_is_detected(
    seg: tuple[list[int], list[Compression]], where: float, data: st.DataObject
) -> None:
    buf, ends = _segment(*seg)
    starts = [0, *ends[:-1]]
    # Pick a batch, then a byte from its CRC field on (offset 17 to its end).
    index = int(where * len(ends))
    start, end = starts[index], ends[index]
    pos = data.draw(st.integers(min_value=start + 17, max_value=end - 1))
    buf[pos] ^= data.draw(st.integers(min_value=1, max_value=255))
    with pytest.raises(KafkaError) as info:
        validate_client_batches(memoryview(buf))
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE
    headers, length = scan_valid_prefix(buf)
    assert length == start and len(headers) == index


@settings(max_examples=200, deadline=None)
@given(seg=segments, data=st.data())
def test_scan_keeps_exactly_the_complete_prefix(
    seg: tuple[list[int], list[Compression]], data: st.DataObject
) -> None:
    buf, ends = _segment(*seg)
    cut = data.draw(st.integers(min_value=0, max_value=len(buf)))
    tail = data.draw(st.sampled_from([b"", b"\x00" * 100, b"\xff" * 7]))
    damaged = bytes(buf[:cut]) + tail
    headers, length = scan_valid_prefix(damaged)
    # A batch survives when its bytes are unchanged; padding can recreate a cut tail byte for byte
    # (a gzip trailer ending in zeros, padded with zeros), and then that batch is rightly still valid.
    complete = []
    for start, end in zip([0, *ends[:-1]], ends, strict=True):
        if damaged[start:end] != bytes(buf[start:end]):
            break
        complete.append(end)
    assert length == (complete[-1] if complete else 0)
    assert len(headers) == len(complete)
    assert [h.position + h.size for h in headers] == complete


@settings(max_examples=100, deadline=None)
@given(seg=segments, data=st.data())
def test_scan_stops_at_offsets_going_backwards(
    seg: tuple[list[int], list[Compression]], data: st.DataObject
) -> None:
    buf, ends = _segment(*seg)
    if len(ends) < 2:
        return
    index = data.draw(st.integers(min_value=1, max_value=len(ends) - 1))
    patch_offset_and_epoch(buf, ends[index - 1], 0, 0)  # base offset 0 again: not increasing
    headers, length = scan_valid_prefix(buf)
    assert len(headers) == index and length == ends[index - 1]
