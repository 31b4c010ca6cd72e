"""kafkajs (Node.js) against a real kafkad: admin, idempotent producer (none and gzip), consumer group.

kafkajs ignores the broker's minimum versions and uses no flexible versions at all, so it exercises a
different corner of the advertised set than the librdkafka and Python clients. `make test` installs it
with npm into tests/integration/kafkajs/node_modules.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent / "kafkajs"


def test_kafkajs_produces_and_consumes_in_a_group(bootstrap: str) -> None:
    node = shutil.which("node")
    assert node, "node is required for the kafkajs test (`make test` checks for it)"
    assert (HERE / "node_modules" / "kafkajs").is_dir(), "kafkajs is not installed: run `make test`"
    proc = subprocess.run(
        [node, str(HERE / "roundtrip.js"), bootstrap, "kafkajs-roundtrip", "6000"],
        capture_output=True,
        timeout=420,
        cwd=HERE,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    summary = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert summary == {"ok": True, "produced": 6000, "consumed": 6000, "distinct": 6000}
