"""Loads tests/golden/requests.jsonl: real request frames captured from real clients."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "requests.jsonl"


@dataclass(frozen=True, slots=True)
class GoldenFrame:
    client_id: str
    api_key: int
    api_version: int
    frame: bytes

    @property
    def label(self) -> str:
        return f"{self.client_id}-k{self.api_key}v{self.api_version}"


def load_golden() -> list[GoldenFrame]:
    out = []
    for line in GOLDEN.read_text().splitlines():
        if line.strip():
            j = json.loads(line)
            out.append(
                GoldenFrame(j["client_id"], j["api_key"], j["api_version"], bytes.fromhex(j["frame_hex"]))
            )
    return out
