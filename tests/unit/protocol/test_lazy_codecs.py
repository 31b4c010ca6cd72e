"""Body codecs are compiled on first use, not at import (kafkad/protocol/registry.py, issue 21 item 3).

A fresh interpreter imports kafkad.protocol and compiles nothing; decoding one request compiles that
(api, version) alone; an undeclared version is still refused; CODECS still lists every declared pair.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

_CHILD = r"""
import json
from kafkad.protocol import compiler, decode_request, encode_request, RequestHeader
from kafkad.protocol.errors import UnsupportedVersionError
from kafkad.protocol.registry import CODECS

seen = {"at_import": len(compiler._COMPILED), "compiled_at_import": len(CODECS.compiled)}
frame = encode_request(RequestHeader(18, 3, 1, "c"), {"client_software_name": "t", "client_software_version": "1"})
decode_request(frame[4:])
seen["after_one"] = sorted(CODECS.compiled)
bad = bytearray(frame[4:])
bad[2:4] = (99).to_bytes(2, "big")  # ApiVersions v99: not declared
try:
    decode_request(bytes(bad))
    seen["v99"] = "decoded"
except UnsupportedVersionError:
    seen["v99"] = "unsupported"
seen["declared"] = len(CODECS)
seen["listed"] = len(list(CODECS))
print(json.dumps(seen))
"""


def test_codecs_compile_on_first_use_only() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["at_import"] == 0 and seen["compiled_at_import"] == 0
    assert seen["after_one"] == [[18, 3]]
    assert seen["v99"] == "unsupported"
    assert seen["declared"] == seen["listed"] > 200  # every (api, version) the schemas declare
