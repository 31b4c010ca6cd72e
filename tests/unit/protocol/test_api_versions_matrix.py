"""The handler registry against Kafka 3.9's version matrix (issue 23): every API kafkad serves accepts
every version Kafka 3.9 accepts, each version has a compiled codec, and the docs table is current."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkad.api import load_handlers
from kafkad.protocol import SCHEMAS, RequestHeader, decode_request, decode_response, encode_request
from kafkad.protocol.codec import encode_response_bytes
from tests.unit.protocol.api_versions_table import CAPPED, kafka_39, render

DOC = Path(__file__).resolve().parents[3] / "docs" / "api-versions.md"
REGISTRY = load_handlers()
SPECS = sorted((e["api_key"], e["min_version"], e["max_version"]) for e in REGISTRY.api_versions())


@pytest.mark.parametrize(("key", "lo", "hi"), SPECS, ids=[str(s[0]) for s in SPECS])
def test_handler_range_is_kafka_39s(key: int, lo: int, hi: int) -> None:
    kafka = kafka_39()[key]
    assert lo == kafka["min"], f"{kafka['name']}: kafkad starts at v{lo}, Kafka 3.9 at v{kafka['min']}"
    top = CAPPED[key][0] if key in CAPPED else kafka["max"]
    assert hi == top, f"{kafka['name']}: kafkad stops at v{hi}, Kafka 3.9 at v{kafka['max']}"
    flexible = kafka["flexible"]
    for v in range(lo, hi + 1):
        assert SCHEMAS[key].is_flexible(v) == (flexible != "none" and v >= int(flexible.rstrip("+")))


def _defaults(fields: Any, version: int) -> dict[str, Any]:
    return {f.name: f.default_value() for f in fields if f.present(version)}


@pytest.mark.parametrize(("key", "lo", "hi"), SPECS, ids=[str(s[0]) for s in SPECS])
def test_every_served_version_round_trips_a_default_body(key: int, lo: int, hi: int) -> None:
    api = SCHEMAS[key]
    for v in range(lo, hi + 1):
        header = RequestHeader(key, v, 7, "matrix")
        frame = encode_request(header, _defaults(api.request, v))
        req = decode_request(bytearray(frame[4:]))
        assert req.header[:3] == header[:3]  # ControlledShutdown v0's header v0 has no client id
        assert encode_request(header, req.body) == frame
        resp = encode_response_bytes(header, _defaults(api.response, v))
        corr, body = decode_response(key, v, resp[4:])
        assert corr == 7
        assert encode_response_bytes(header, body) == resp


def test_docs_table_is_generated_from_the_registry() -> None:
    assert DOC.read_text() == render(), "regenerate: python -m tests.unit.protocol.api_versions_table"
