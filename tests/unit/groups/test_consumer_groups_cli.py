"""Pure parts of kafkad-consumer-groups: assignment decoding, datetimes, argument checks."""

from __future__ import annotations

import struct

import pytest

from kafkad.tools.client import ToolError
from kafkad.tools.consumer_groups import build_parser, check_args, decode_assignment, parse_datetime


def _assignment(topics: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t, ps in topics.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)  # null user data


def test_decode_consumer_protocol_assignment() -> None:
    raw = _assignment({"a": [0, 2], "bb": [1]})
    assert decode_assignment(raw) == [("a", 0), ("a", 2), ("bb", 1)]
    assert decode_assignment(b"") == []
    assert decode_assignment(raw[:9]) == []  # truncated: what could be read


def test_parse_datetime_with_zone() -> None:
    assert parse_datetime("2024-01-02T03:04:05.678Z") == 1704164645678
    assert parse_datetime("2024-01-02T03:04:05+01:00") == 1704161045000
    with pytest.raises(ToolError):
        parse_datetime("yesterday")


def test_argument_checks() -> None:
    p = build_parser()
    with pytest.raises(ToolError, match="exactly one action"):
        check_args(p.parse_args(["--list", "--describe"]))
    with pytest.raises(ToolError, match="all-groups"):
        check_args(p.parse_args(["--describe"]))
    with pytest.raises(ToolError, match="dry-run"):
        check_args(
            p.parse_args(["--reset-offsets", "--group", "g", "--topic", "t", "--dry-run", "--execute"])
        )
    assert check_args(p.parse_args(["--delete", "--group", "g"])) == "delete"
