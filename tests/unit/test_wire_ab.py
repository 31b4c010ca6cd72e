"""scripts/wire_ab.py's comparison finds each kind of difference (and masks only what is random per run)."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

_SPEC = importlib.util.spec_from_file_location(
    "wire_ab", Path(__file__).resolve().parents[2] / "scripts" / "wire_ab.py"
)
assert _SPEC is not None and _SPEC.loader is not None
wire_ab = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(wire_ab)

BASE: dict[str, Any] = {
    "responses": [
        {
            "i": 0,
            "client": "rdkafka",
            "api": [3, 12],
            "body": {"brokers": [{"port": "<masked>"}]},
            "bytes": 120,
        },
        {"i": 1, "client": "rdkafka", "api": [0, 9], "body": {"responses": []}, "bytes": "ab" * 32},
    ],
    "files": [
        {"file": "t-0/00000000000000000000.log", "size": 10, "sha256": "00"},
        {"file": "meta.properties"},
    ],
    "log_errors": 0,
}


def test_equal_records_have_no_difference() -> None:
    assert wire_ab.diff(BASE, copy.deepcopy(BASE)) == []


def test_a_changed_response_byte_a_changed_file_and_log_errors_are_each_reported() -> None:
    head = copy.deepcopy(BASE)
    head["responses"][1]["bytes"] = "cd" * 32
    assert len(wire_ab.diff(BASE, head)) == 1
    head = copy.deepcopy(BASE)
    head["files"][0]["sha256"] = "01"
    assert "file t-0/" in wire_ab.diff(BASE, head)[0]
    head = copy.deepcopy(BASE)
    head["files"].append({"file": "t-0/00000000000000000000.txnindex", "size": 0, "sha256": "e3"})
    assert len(wire_ab.diff(BASE, head)) == 1
    head = copy.deepcopy(BASE)
    head["log_errors"] = 1
    assert "ERROR" in wire_ab.diff(BASE, head)[0]
    head = copy.deepcopy(BASE)
    head["responses"].pop()
    assert wire_ab.diff(BASE, head)


def test_masking_blanks_random_ids_only() -> None:
    masked, hit = wire_ab._mask({"cluster_id": "abc", "topics": [{"topic_id": b"x" * 16, "name": "t"}]})
    assert hit and masked == {"cluster_id": "<masked>", "topics": [{"topic_id": "<masked>", "name": "t"}]}
    masked, hit = wire_ab._mask({"error_code": 0, "records": b"\x00\x01"})
    assert not hit and masked == {"error_code": 0, "records": "0001"}
