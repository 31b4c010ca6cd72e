"""A started broker keeps its startup objects out of the cyclic collector (gc.freeze, issue 21 item 6).

A full collection walks every tracked object: in a running broker that was ~70 ms of stalled event loop
under load (the end-to-end latency rows' p99.9), once per ~10 s at 50k msg/s. The child starts kafkad as
`main()` does and, once the listener accepts, reads how many objects are frozen and how many the collector
still tracks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.integration.broker_process import free_port

REPO = Path(__file__).resolve().parents[2]

_CHILD = r"""
import asyncio, gc, json, sys
from pathlib import Path

import uvloop

from kafkad.service.main import _setup_logging, load_config, run

data, port = sys.argv[1], int(sys.argv[2])
_setup_logging("WARNING")
listener = f"PLAINTEXT://127.0.0.1:{port}"
config = load_config(
    Path("config/server.properties"), [f"log.dirs={data}", f"listeners={listener}", f"advertised.listeners={listener}"]
)
seen = {}


async def main() -> int:
    stop = asyncio.Event()

    async def probe() -> None:
        for _ in range(1200):  # up to 60 s for the listener and the end of startup
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            if gc.get_freeze_count():
                break
            await asyncio.sleep(0.05)
        seen["frozen"] = gc.get_freeze_count()
        seen["tracked"] = len(gc.get_objects())
        stop.set()

    task = asyncio.ensure_future(probe())
    rc = await run(config, stop=stop)
    await task
    return rc


assert uvloop.run(main()) == 0
print(json.dumps(seen))
"""


def test_started_broker_has_frozen_its_startup_objects(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "data"), str(free_port())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ERROR" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    # Most of the heap is frozen; what the collector still walks is what came after startup.
    assert seen["frozen"] > 4 * seen["tracked"], seen
