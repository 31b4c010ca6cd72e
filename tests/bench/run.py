"""`make bench`: kafkad's benchmark suite, every figure beside a baseline measured in the same run.

Run: .venv/bin/python -m tests.bench.run [--mode quick|full] [--only produce,small,...] [--keep]
quick takes a few minutes (3 runs each); full is longer (5 runs, bigger data, 50k msg/s latency).
Prints a Markdown table (min / median / max per figure, ratios taken run by run, PASS/MISS beside each
target) and writes bench/results/<mode>.json and PNG plots next to it. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from tests.bench import (
    report,
    scenario_durability,
    scenario_failover,
    scenario_fetch,
    scenario_memory,
    scenario_misc,
    scenario_produce,
    scenario_replication,
    scenario_reset,
    scenario_transactions,
)
from tests.bench.context import SETTINGS, Context, Mode
from tests.bench.servers import start_broker, start_sink
from tests.bench.workers import Pool

log = logging.getLogger("bench")
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"

# Order matters: idle memory first (fresh broker), recovery last (it stops the main broker to free RAM).
SCENARIOS: dict[str, Callable[[Context], None]] = {
    "memory": scenario_memory.memory,  # fresh brokers, a bare uvloop interpreter, a ZooKeeper cluster
    "produce": scenario_produce.produce_matrix,
    "small": scenario_produce.small_requests,
    "partitions": scenario_produce.partitions,
    "latency": scenario_misc.latency,
    "fetch": scenario_fetch.fetch,
    "failover": scenario_failover.failover,  # ZooKeeper + 3 kafkad in cluster mode (issue 10)
    "replication": scenario_replication.replication,  # same, RF 3 (issue 11)
    "reset": scenario_reset.offset_reset,  # out-of-range consumers of each Python stack (issue 15)
    "durability": scenario_durability.durability,  # flush.messages=1 vs default, standalone and RF 3 (issue 18)
    "conversion": scenario_misc.conversion,  # message format v0/v1 (issue 23), in process
    "transactions": scenario_transactions.transactions,  # EOS throughput, read_committed, failover (issue 20)
    "recovery": scenario_misc.recovery,
}


_SNAPSHOT_ENV = "KAFKAD_BENCH_SNAPSHOT"
REPO = Path(__file__).resolve().parents[2]


def _git_commit() -> str:
    env_commit = os.environ.get(_SNAPSHOT_ENV)
    if env_commit:
        return env_commit
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "kafkad"], cwd=REPO, capture_output=True, text=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _run_in_snapshot(args: list[str]) -> int:
    """Re-run this suite from `git archive HEAD` in a tmp dir (PYTHONPATH first, so the broker and the
    workers import the snapshot's kafkad, not the editable install)."""
    snap = Path(tempfile.mkdtemp(prefix="kafkad-snap-"))
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        )
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(snap)], input=archive.stdout, check=True)
        for f in (REPO / "tests" / "bench").glob("*.py"):
            shutil.copy(f, snap / "tests" / "bench" / f.name)
        env = {**os.environ, "PYTHONPATH": str(snap), _SNAPSHOT_ENV: head.stdout.strip()}
        return subprocess.call([sys.executable, "-m", "tests.bench.run", *args], cwd=snap, env=env)
    finally:
        shutil.rmtree(snap, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="kafkad benchmark suite")
    p.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.QUICK.value)
    p.add_argument("--only", default="", help=f"comma-separated subset of {','.join(SCENARIOS)}")
    p.add_argument("--work-dir", type=Path, default=None, help="where data goes (default: a tmp dir)")
    p.add_argument("--keep", action="store_true", help="keep the work dir")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--recovery-gib",
        type=float,
        default=None,
        help="data size of the recovery row (default: the mode's; full mode's 10 GiB may not fit a shared box)",
    )
    p.add_argument(
        "--snapshot",
        action="store_true",
        help="measure the committed HEAD (with this tree's tests/bench), not a working tree others are editing",
    )
    p.add_argument("--latency-rates", default="", help="msg/s for the latency scenario, e.g. 10000,50000")
    a = p.parse_args(argv)
    if a.snapshot and not os.environ.get(_SNAPSHOT_ENV):
        args = [x for x in (sys.argv[1:] if argv is None else argv) if x != "--snapshot"]
        return _run_in_snapshot([*args, "--out", str(a.out.resolve())])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    mode = Mode(a.mode)
    only = [s for s in a.only.split(",") if s] or list(SCENARIOS)
    unknown = set(only) - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenarios: {sorted(unknown)}")
    work = a.work_dir or Path(tempfile.mkdtemp(prefix="kafkad-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    pool = Pool(4)
    broker = start_broker(work)
    sink = start_sink(work)
    settings = SETTINGS[mode]
    if a.recovery_gib is not None:
        settings = dataclasses.replace(settings, recovery_bytes=int(a.recovery_gib * (1 << 30)))
    if a.latency_rates:
        settings = dataclasses.replace(
            settings, latency_rates=tuple(int(r) for r in a.latency_rates.split(","))
        )
    ctx = Context(mode, settings, work, pool, broker, sink)
    failed: list[str] = []
    try:
        for name in SCENARIOS:
            if name not in only:
                continue
            log.info("=== %s", name)
            t = time.monotonic()
            if name == "recovery" and broker.running:
                broker.stop()
            try:
                SCENARIOS[name](ctx)
            except Exception:
                log.exception("scenario %s failed", name)
                failed.append(name)
            log.info("=== %s took %.0fs", name, time.monotonic() - t)
    finally:
        sink.stop()
        if broker.running:
            broker.stop()
        pool.close()
        if not a.keep and a.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    meta = {
        "cpus": os.cpu_count(),
        "mem_gib": round(psutil.virtual_memory().total / (1 << 30), 1),
        "loadavg_at_end": os.getloadavg(),
        "wall_s": round(time.monotonic() - started, 1),
        "scenarios": only,
        "failed": failed,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "commit": _git_commit(),
    }
    suffix = "" if set(only) == set(SCENARIOS) else "-" + "-".join(only)
    report.write_json(a.out / f"{mode.value}{suffix}.json", mode.value, ctx.rows, ctx.series, meta)
    plotted = any(k in ctx.series for k in ("produce", "partitions", "latency"))
    pngs = report.plots(a.out, mode.value + suffix, ctx.series) if plotted else []
    table = report.table(ctx.rows)
    (a.out / f"{mode.value}{suffix}.md").write_text(
        f"kafkad bench, mode {mode.value}, commit {meta['commit']}, {meta['date']}, wall {meta['wall_s']}s\n\n"
        + table
        + "\n"
    )
    print(table)
    print(
        f"\nwall {meta['wall_s']}s; wrote {a.out / (mode.value + suffix + '.json')} and {[str(p) for p in pngs]}"
    )
    if failed:
        print(f"FAILED scenarios: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
