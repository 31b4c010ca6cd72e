"""Import discipline of a running broker: a configuration loads only the code it uses (issue 21 item 3).

Each case starts kafkad in a fresh interpreter the way `kafkad.service.main` does (its command line
parsed as main() parses it, load_config, then `run` under uvloop), waits until its listener accepts a
connection, and reads `sys.modules` there. A PLAINTEXT standalone broker must not have imported the ZooKeeper client, the controller, the Spark
bridge, TLS/SASL/SCRAM, prometheus_client or psutil (of the election and bridge packages only the settings
vocabularies the configuration is parsed into); the same broker with `metrics.listeners` set
loads prometheus_client, so the check follows the configuration rather than a list of banned names.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.integration.broker_process import free_port

REPO = Path(__file__).resolve().parents[2]

# Runs in the child: start the broker as main() does, report sys.modules once it accepts connections.
_CHILD = r"""
import asyncio, json, sys
from pathlib import Path

import uvloop

from kafkad.service.main import _parse_args, _setup_logging, load_config, run

data, port, overrides = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
listener = f"PLAINTEXT://127.0.0.1:{port}"
sets = [f"log.dirs={data}", f"listeners={listener}", f"advertised.listeners={listener}", *overrides]
# The command line as a service unit passes it, parsed as main() parses it.
argv = ["--config", "config/server.properties", "--log-level", "WARNING"]
args = _parse_args(argv + [a for kv in sets for a in ("--override", kv)])
_setup_logging(args.log_level)
config = load_config(args.config, args.override)
seen = []


async def main() -> int:
    stop = asyncio.Event()

    async def probe() -> None:
        for _ in range(1200):  # up to 60 s for the listener
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            seen.extend(sys.modules)
            break
        stop.set()

    task = asyncio.ensure_future(probe())
    rc = await run(config, stop=stop)
    await task
    return rc


assert uvloop.run(main()) == 0
print(json.dumps(sorted(seen)))
"""

NOT_IN_STANDALONE_PLAINTEXT = (
    "kazoo",
    "pyarrow",
    "pyspark",
    "prometheus_client",
    "psutil",
    "importlib.metadata",  # the crc32c package's __init__ (kafkad.storage.crc loads its extension only)
    "shutil",  # and with it bz2 and lzma: only a deletion's rmtree needs it (kafkad.storage.log_manager)
    "bz2",
    "lzma",
    "argparse",  # and gettext: main() parses a service's plain command line itself (kafkad.service.main)
    "gettext",
    "random",  # fetch session ids and the segment roll jitter draw from os.urandom
    "cramjam",  # imported at the first compressed batch (kafkad.storage.records.codecs)
    "encodings.idna",  # and stringprep, unicodedata: a listener on an IP literal is bound without
    "unicodedata",  # uvloop's host.encode("idna") (kafkad.network.server._literal_socket)
    "kafkad.zk.client",
    "kafkad.controller.controller",
    "kafkad.cluster.zk_mode",
    "kafkad.cluster.replication_service",
    "kafkad.service.bridge_service",
    "kafkad.service.metrics",
    "kafkad.security.scram",
    "kafkad.security.credentials",
    "kafkad.security.session",
    "kafkad.security.tls",
    "kafkad.security.zk_store",
    "kafkad.security.inter_broker",
    "kafkad.security.api_acls",
)

# What this configuration does use: its absence would mean the probe never saw a started broker.
IN_STANDALONE = (
    "kafkad.api.produce",
    "kafkad.api.sasl",  # registered (ApiVersions lists it) even without SASL listeners
    "kafkad.coordinator.group.service",
    "kafkad.storage.cleaner",  # log.cleaner.enable defaults to true
    "kafkad.security.runtime",
)


def _modules_of_started_broker(tmp_path: Path, *overrides: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "data"), str(free_port()), *overrides],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ERROR" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    mods = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert mods, "the broker never accepted a connection"
    return mods


# Settings vocabularies the configuration is parsed into (BrokerConfig's fields), whatever it sets:
# the only modules of these packages a standalone broker may load.
CONFIG_VOCABULARY = {"kafkad.zk.security", "kafkad.spark_bridge.s3"}


def test_plaintext_standalone_imports_only_what_it_uses(tmp_path: Path) -> None:
    mods = _modules_of_started_broker(tmp_path)
    assert sorted(m for m in NOT_IN_STANDALONE_PLAINTEXT if m in mods) == []
    packages = (
        "kafkad.zk.",
        "kafkad.controller.",
        "kafkad.cluster.isr_writer",
        "kafkad.spark_bridge.",
    )
    assert sorted(m for m in mods if m.startswith(packages) and m not in CONFIG_VOCABULARY) == []
    assert sorted(m for m in IN_STANDALONE if m not in mods) == []


def test_metrics_listener_loads_the_metrics(tmp_path: Path) -> None:
    mods = _modules_of_started_broker(tmp_path, f"metrics.listeners=http://127.0.0.1:{free_port()}")
    assert {"prometheus_client", "psutil", "kafkad.service.metrics"} <= mods
    assert "kafkad.security.scram" not in mods


def test_security_file_names_match_their_stores() -> None:
    """SecurityRuntime names the stores' files without importing them (checked against the stores)."""
    from kafkad.security import acl_store, credentials, runtime

    assert runtime.CREDENTIALS_FILE == credentials.FILE_NAME
    assert runtime.ACLS_FILE == acl_store.FILE_NAME
