"""Idle memory (issue 21 item 3): VmRSS of freshly started brokers, each beside a bare interpreter.

Per run, in alternating order: a bare `import uvloop` interpreter idling on its loop (the floor any
uvloop broker starts from), a standalone kafkad with this suite's defaults, and a standalone kafkad
holding one topic of 1,000 partitions (created once, then each run a fresh start that loads them from
disk). Each process is read after IDLE_S of idling past its startup (the startup's allocations are
done; nothing is connected). Cluster mode: a real ZooKeeper and three kafkad (tests/bench/cluster_env),
the controller and a non-controller read once per run, beside that run's standalone broker.

Bytecode: every process runs with its .pyc files cached (under the work dir), as the installed package
has them (packaging/build.sh byte-compiles); without them, an environment with PYTHONDONTWRITEBYTECODE
compiles every module at each start and its RSS is ~1.7 MB higher, which no deployment sees. The first
start (the one that creates the 1,000-partition topic) writes that cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.bench.cluster_env import cluster_env
from tests.bench.context import Context
from tests.bench.servers import BROKER_DEFAULTS, create_topic
from tests.bench.stats import Row, figure, ratio
from tests.bench.stats import Target as Goal
from tests.integration.broker_process import BrokerProcess

log = logging.getLogger(__name__)
SECTION = "memory"
IDLE_S = 2.0  # idle time after startup before RSS is read
PARTITIONS = 1000

# The floor: an interpreter with uvloop's event loop running, nothing else.
_BARE = "import sys, uvloop, asyncio\nasync def m():\n    print('ready', flush=True)\n    await asyncio.sleep(3600)\nuvloop.run(m())\n"


def vm_rss_mb(pid: int) -> float:
    """VmRSS of `pid` in MB (10^6 bytes), as /proc/PID/status reports it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _bare_rss_mb() -> float:
    proc = subprocess.Popen(
        [sys.executable, "-c", _BARE], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(IDLE_S)
        return vm_rss_mb(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def _broker_rss_mb(broker: BrokerProcess) -> float:
    broker.start()
    try:
        time.sleep(IDLE_S)
        return vm_rss_mb(broker.pid)
    finally:
        broker.stop()


@contextlib.contextmanager
def _bytecode_cached(cache: Path) -> Iterator[None]:
    """Child processes started in the with-block write and use .pyc files under `cache`."""
    saved = {k: os.environ.get(k) for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(cache)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def memory(ctx: Context) -> None:
    work = ctx.work / "memory"
    with _bytecode_cached(work / "pycache"):
        _memory(ctx, work)


def _memory(ctx: Context, work: Path) -> None:
    plain = BrokerProcess(work / "standalone", dict(BROKER_DEFAULTS), startup_timeout_s=120)
    many = BrokerProcess(work / f"p{PARTITIONS}", dict(BROKER_DEFAULTS), startup_timeout_s=120)
    many.start()
    create_topic(many.bootstrap, "idle", PARTITIONS)
    many.stop()
    got: dict[str, list[float]] = {"bare": [], "standalone": [], "many": []}
    for i in range(ctx.settings.runs):
        legs = [("bare", _bare_rss_mb), ("standalone", lambda: _broker_rss_mb(plain))]
        legs.append(("many", lambda: _broker_rss_mb(many)))
        for name, read in legs if i % 2 == 0 else legs[::-1]:
            got[name].append(read())
        log.info("run %d: %s", i, {k: round(v[-1], 1) for k, v in got.items()})
    bare = figure("bare uvloop rss", "MB", got["bare"])
    sa = figure("standalone rss idle", "MB", got["standalone"])
    many_f = figure(f"{PARTITIONS} partitions rss idle", "MB", got["many"])
    for label, fig, goal in (
        ("RSS idle, standalone (VmRSS after startup)", sa, 32),
        (f"RSS idle, standalone with {PARTITIONS} partitions", many_f, 80),
    ):
        ctx.rows.append(
            Row(SECTION, label, fig, bare, "bare uvloop interpreter", ratio("", fig, bare), Goal("<=", goal))
        )
    ctx.series["memory"] = got
    _cluster(ctx, work, got["standalone"])


def _cluster(ctx: Context, work: Path, standalone: list[float]) -> None:
    samples: dict[str, list[float]] = {"ctrl": [], "other": []}
    with cluster_env(work / "cluster") as c:
        ctrl = c.wait_controller()
        other = next(x for x in c.ids if x != ctrl)
        time.sleep(IDLE_S)
        for _ in range(ctx.settings.runs):
            samples["ctrl"].append(vm_rss_mb(c.broker(ctrl).pid))
            samples["other"].append(vm_rss_mb(c.broker(other).pid))
            time.sleep(0.2)
    base = figure("standalone rss idle", "MB", standalone)
    for key, label in (("ctrl", "the controller"), ("other", "a broker, not controller")):
        k = figure(f"cluster rss idle {key}", "MB", samples[key])
        ctx.rows.append(
            Row(
                SECTION,
                f"RSS idle, cluster mode ({label}, ZooKeeper client included)",
                k,
                base,
                "standalone kafkad, same run",
                ratio("", k, base),
                Goal("<=", 40),
            )
        )
    ctx.series["memory_cluster"] = samples
