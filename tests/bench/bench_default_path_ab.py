"""A/B of the default path (Kafka's defaults: no flush settings): a base commit's kafkad against this tree's.

    .venv/bin/python -m tests.bench.bench_default_path_ab --base a741607 [--runs 7] [--seconds 2]

Both brokers run side by side (the base from `git archive <base>` in a tmp dir, first on PYTHONPATH);
each run measures both, alternating which goes first: 64 connections with one 1-record Produce in flight
each (req/s), and one confluent-kafka producer, acks=1, linger.ms 5, 100-byte records (rec/s). Prints the
per-run ratio this tree / base as min / median / max. Used to check that issue 18's flush-before-answer
(storage/log_sync.py) costs nothing when no flush setting is set.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from tests.bench.servers import create_topic
from tests.bench.workers import Job, Pool
from tests.integration.broker_process import BrokerProcess

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {"num.partitions": "1", "auto.create.topics.enable": "true"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="the commit to compare against")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--seconds", type=float, default=2.0)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kafkad-ab-"))
    base_src = work / "base-src"
    base_src.mkdir()
    archive = subprocess.run(["git", "archive", a.base], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(base_src)], input=archive.stdout, check=True)
    brokers = {
        "base": BrokerProcess(work / "base", SETTINGS, command_prefix=["env", f"PYTHONPATH={base_src}"]),
        "this": BrokerProcess(work / "this", SETTINGS, command_prefix=["env", f"PYTHONPATH={REPO}"]),
    }
    pool = Pool(4)
    res: dict[tuple[str, str], list[float]] = {(n, k): [] for n in brokers for k in ("small", "linger5")}
    try:
        for b in brokers.values():
            b.start()
            create_topic(b.bootstrap, "small", 1)
            create_topic(b.bootstrap, "bench", 1)
        for i in range(a.runs):
            order = list(brokers.items()) if i % 2 == 0 else list(brokers.items())[::-1]
            for name, b in order:
                small = {
                    "port": b.port,
                    "topic": "small",
                    "connections": 64,
                    "duration_s": a.seconds,
                    "record_size": 100,
                }
                r = pool.run([Job("raw_small_requests", small)]).results[0]
                res[(name, "small")].append(r["requests"] / r["s"])
                conf = {"acks": "1", "linger.ms": 5}
                job = {
                    "bootstrap": b.bootstrap,
                    "topic": "bench",
                    "size": 100,
                    "duration_s": a.seconds,
                    "config": conf,
                }
                r = pool.run([Job("produce_throughput", job)]).results[0]
                res[(name, "linger5")].append(r["records"] / r["s"])
            print(i, {f"{k[0]} {k[1]}": round(v[-1]) for k, v in res.items()}, flush=True)
    finally:
        pool.close()
        for b in brokers.values():
            if b.running:
                b.stop()
        shutil.rmtree(work, ignore_errors=True)
    for kind in ("small", "linger5"):
        ratios = [t / b for t, b in zip(res[("this", kind)], res[("base", kind)], strict=True)]
        print(
            f"{kind}: this/base min / median / max {min(ratios):.3f} / {statistics.median(ratios):.3f} / "
            f"{max(ratios):.3f} (base median {statistics.median(res[('base', kind)]):.0f}, "
            f"this {statistics.median(res[('this', kind)]):.0f})"
        )


if __name__ == "__main__":
    main()
