"""Primitive wire types round-trip, and their readers reject truncation with ProtocolDecodeError."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkad.protocol import ProtocolDecodeError
from kafkad.protocol import primitives as p

TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40)


def _round_trip(rd: p.Reader, wr: p.Writer, value: Any) -> Any:
    out = p.Out()
    wr(out, value)
    data = bytes(out)
    got, pos = rd(memoryview(data), 0)
    assert pos == len(data)
    for cut in range(len(data)):  # every strict prefix is a truncation error
        # Readers raise these; the codec's entry points turn the last two into ProtocolDecodeError.
        with pytest.raises((ProtocolDecodeError, IndexError, struct.error)):
            rd(memoryview(data[:cut]), 0)
    return got


# deadline=None throughout: no per-example wall-clock limit (a loaded machine stalls any process).
@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_uvarint(v: int) -> None:
    out = bytearray()
    p.write_uvarint(out, v)
    assert p.read_uvarint(memoryview(bytes(out)), 0) == (v, len(out))


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_zigzag_varlong(v: int) -> None:
    out = bytearray()
    p.write_varlong(out, v)
    assert p.read_varlong(memoryview(bytes(out)), 0) == (v, len(out))
    if -64 <= v < 64:
        assert len(out) == 1  # zig-zag keeps small magnitudes short


def test_zigzag_known_encodings() -> None:
    for v, enc in [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01")]:
        out = bytearray()
        p.write_varint(out, v)
        assert bytes(out) == enc


@pytest.mark.parametrize(
    ("type_", "lo", "hi"),
    [
        ("int8", -(2**7), 2**7 - 1),
        ("int16", -(2**15), 2**15 - 1),
        ("int32", -(2**31), 2**31 - 1),
        ("int64", -(2**63), 2**63 - 1),
        ("uint16", 0, 2**16 - 1),
        ("uint32", 0, 2**32 - 1),
    ],
)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_fixed_ints(type_: str, lo: int, hi: int, data: st.DataObject) -> None:
    v = data.draw(st.integers(min_value=lo, max_value=hi))
    rd, wr = p.primitive_codec(type_, False, False)
    assert _round_trip(rd, wr, v) == v


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=False), st.booleans(), st.uuids())
def test_float_bool_uuid(f: float, b: bool, u: Any) -> None:
    assert _round_trip(*p.primitive_codec("float64", False, False), f) == f
    assert _round_trip(*p.primitive_codec("bool", False, False), b) is b
    assert _round_trip(*p.primitive_codec("uuid", False, False), u) == u


@settings(max_examples=200, deadline=None)
@given(st.booleans(), st.none() | TEXT)
def test_strings(compact: bool, s: str | None) -> None:
    rd, wr = p.primitive_codec("string", compact, True)
    assert _round_trip(rd, wr, s) == s
    if s is None:
        with pytest.raises(ValueError):
            p.primitive_codec("string", compact, False)[1](p.Out(), None)


@settings(max_examples=200, deadline=None)
@given(st.booleans(), st.none() | st.binary(max_size=300))
def test_bytes_and_records(compact: bool, b: bytes | None) -> None:
    assert _round_trip(*p.primitive_codec("bytes", compact, True), b) == b
    got = _round_trip(*p.primitive_codec("records", compact, True), b)
    assert (None if got is None else bytes(got)) == b


@settings(max_examples=200, deadline=None)
@given(st.booleans(), st.none() | st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20))
def test_arrays(compact: bool, items: list[int] | None) -> None:
    ird, iwr = p.primitive_codec("int32", compact, False)
    rd, wr = p.array_reader(ird, compact, True), p.array_writer(iwr, compact, True)
    assert _round_trip(rd, wr, items) == items


def test_compact_lengths_are_unsigned_varints_of_n_plus_one() -> None:
    out = p.Out()
    p.primitive_codec("string", True, True)[1](out, None)
    p.primitive_codec("string", True, True)[1](out, "ab")
    assert bytes(out) == b"\x00\x03ab"


def test_huge_array_count_is_rejected_before_looping() -> None:
    rd = p.array_reader(p.primitive_codec("int8", False, False)[0], False, False)
    with pytest.raises(ProtocolDecodeError):
        rd(memoryview(b"\x7f\xff\xff\xff\x00"), 0)
