"""Truncated and mutated golden frames raise only the codec's own errors, never IndexError/struct.error."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkad.protocol import (
    InvalidRequestError,
    ProtocolDecodeError,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    encode_request,
)
from tests.unit.protocol.golden import GoldenFrame, load_golden

FRAMES = load_golden()


@settings(max_examples=200, deadline=None)
@given(g=st.sampled_from(FRAMES), data=st.data())
def test_truncated_golden_frames(g: GoldenFrame, data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(g.frame) - 1))
    try:
        decode_request(bytearray(g.frame[:cut]))
    except (InvalidRequestError, UnsupportedVersionError):
        return
    raise AssertionError(f"a {cut}-byte prefix of {g.label} decoded")


@settings(max_examples=200, deadline=None)
@given(
    g=st.sampled_from(FRAMES),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1),
)
def test_mutated_golden_frames(g: GoldenFrame, edits: list[tuple[float, int]]) -> None:
    frame = bytearray(g.frame)
    for where, byte in edits:
        frame[int(where * len(frame))] = byte
    try:
        req = decode_request(frame)
    except (InvalidRequestError, UnsupportedVersionError):
        return
    # Whatever decodes re-encodes to a frame that decodes to the same values (bytes may differ only
    # where the input was non-canonical, e.g. a bool byte of 7 or a padded varint).
    again = decode_request(bytearray(encode_request(req.header, req.body)[4:]))
    assert again.header == req.header
    assert _plain(again.body) == _plain(req.body)


def _plain(v: object) -> object:
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


@settings(max_examples=100, deadline=None)
@given(g=st.sampled_from(FRAMES), junk=st.binary(max_size=64))
def test_random_bodies_after_a_golden_header(g: GoldenFrame, junk: bytes) -> None:
    with contextlib.suppress(InvalidRequestError, UnsupportedVersionError):
        decode_request(bytearray(g.frame[:10] + junk))


@settings(max_examples=200, deadline=None)
@given(g=st.sampled_from(FRAMES), junk=st.binary(max_size=200))
def test_random_response_bytes(g: GoldenFrame, junk: bytes) -> None:
    if g.api_version > 3 and g.api_key == 18:
        return
    with contextlib.suppress(ProtocolDecodeError):
        decode_response(g.api_key, g.api_version, junk)
