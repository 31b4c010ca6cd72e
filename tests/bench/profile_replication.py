"""Profile RF 3 acks=all replication with py-spy: the leader and one follower under the replication
scenario's raw producer (pipelined 16 KiB batches of 100-byte records), and the records/s it reached.

How it works: a real ZooKeeper and three kafkad (tests/bench/cluster_env), one partition led by the
controller, min.insync.replicas 2; the raw producer runs `--seconds` + 2 s while `py-spy record` samples the
leader and a follower for `--seconds`. Folded summaries (as tests/bench/profile.py) go to
bench/results/profile-replication-{leader,follower}.txt.

Run: .venv/bin/python -m tests.bench.profile_replication [--seconds 10] [--connections 1] [--acks -1]
     [--no-spy --rounds 4 --depth 5 --override replica.fetch.min.bytes=32768]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.bench import profile
from tests.bench.bench_replication import OVERRIDES, _cpu, _log_bytes
from tests.bench.cluster_env import cluster_env, create_topic, wait_led_by
from tests.bench.profile import RESULTS, _pyspy, fold
from tests.bench.workers import Job, Pool

log = logging.getLogger("bench.profile_replication")


def _rate(a: argparse.Namespace, c: Any, pool: Pool, leader: int, topic: str, acks: int) -> float:
    job = Job(
        "raw_produce_throughput",
        {
            "port": c.broker(leader).port,
            "topic": topic,
            "connections": a.connections,
            "duration_s": a.seconds,
            "size": 100,
            "batch_bytes": 16384,
            "acks": acks,
            "depth": a.depth,
        },
    )
    r = pool.run([job]).results[0]
    return float(r["records"] / r["s"])


def _rounds(a: argparse.Namespace, c: Any, pool: Pool, leader: int, followers: list[int]) -> None:
    """acks=1 and acks=all alternating on topics of their own: rates, ratio, followers' CPU per GiB."""
    create_topic(c, "prof1", [[leader, *followers]])
    wait_led_by(c, "prof1", 1, leader, 3, 60)
    for i in range(a.rounds):
        got: dict[int, float] = {}
        lead: dict[int, float] = {}  # the leader's CPU per GiB appended, by acks
        for acks in (1, -1) if i % 2 == 0 else (-1, 1):
            topic = "prof1" if acks == 1 else "prof"
            before = {f: (_cpu(c.broker(f).pid), _log_bytes(c, f, topic)) for f in [leader, *followers]}
            got[acks] = _rate(a, c, pool, leader, topic, acks)
            lead_moved = _log_bytes(c, leader, topic) - before[leader][1]
            lead[acks] = (_cpu(c.broker(leader).pid) - before[leader][0]) / (lead_moved / (1 << 30))
            if acks == -1:
                spent = sum(_cpu(c.broker(f).pid) - before[f][0] for f in followers)
                moved = sum(_log_bytes(c, f, topic) - before[f][1] for f in followers)
                cpu = spent / (moved / (1 << 30))
        # Little's law: connections x depth requests in flight, so the mean acks=all answer time
        per_batch = 16384 // 110
        latency_ms = 1000 * a.connections * a.depth * per_batch / got[-1]
        print(
            f"round {i}: acks=1 {got[1]:.0f} acks=all {got[-1]:.0f} rec/s, ratio {got[-1] / got[1]:.3f}, "
            f"followers {cpu:.2f} cpu-s/GiB, leader {lead[-1]:.2f} cpu-s/GiB (acks=1 {lead[1]:.2f}), "
            f"acks=all mean latency {latency_ms:.2f} ms",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--acks", type=int, default=-1)
    p.add_argument("--depth", type=int, default=5, help="Produce requests in flight per connection")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-spy", action="store_true", help="only the rate and the followers' CPU per GiB")
    p.add_argument("--rounds", type=int, default=3, help="with --no-spy: acks=1 / acks=all pairs")
    p.add_argument("--override", action="append", default=[], help="broker config k=v (repeatable)")
    p.add_argument("--native", action="store_true", help="include C frames (uvloop, syscalls)")
    p.add_argument("--keep", action="store_true", help="keep the cluster's work dir (GBs of logs)")
    a = p.parse_args(argv)
    profile.NATIVE = a.native
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work = Path(tempfile.mkdtemp(prefix="kafkad-profile-repl-"))
    pool = Pool(1)
    try:
        overrides = {**OVERRIDES, **dict(o.split("=", 1) for o in a.override)}
        with cluster_env(work, overrides) as c:
            leader = c.wait_controller()
            followers = [x for x in c.ids if x != leader]
            create_topic(c, "prof", [[leader, *followers]])
            wait_led_by(c, "prof", 1, leader, 3, 60)
            if a.no_spy:
                _rounds(a, c, pool, leader, followers)
                return 0
            job = Job(
                "raw_produce_throughput",
                {
                    "port": c.broker(leader).port,
                    "topic": "prof",
                    "connections": a.connections,
                    "duration_s": a.seconds + (0 if a.no_spy else 2),
                    "size": 100,
                    "batch_bytes": 16384,
                    "acks": a.acks,
                },
            )
            raws = {"leader": a.out / "profile-replication-leader.collapsed.txt"}
            raws["follower"] = a.out / "profile-replication-follower.collapsed.txt"
            pids = {"leader": c.broker(leader).pid, "follower": c.broker(followers[0]).pid}
            spies: list[subprocess.Popen[bytes]] = []
            before = {f: (_cpu(c.broker(f).pid), _log_bytes(c, f, "prof")) for f in followers}
            on_go = (
                None if a.no_spy else lambda: spies.extend(_pyspy(pids[k], a.seconds, raws[k]) for k in raws)
            )
            r = pool.run([job], on_go=on_go).results[0]
            spent = sum(_cpu(c.broker(f).pid) - before[f][0] for f in followers)
            moved = sum(_log_bytes(c, f, "prof") - before[f][1] for f in followers)
            print(f"{r['records'] / r['s']:.0f} rec/s; followers {spent / (moved / (1 << 30)):.2f} cpu-s/GiB")
            for s in spies:
                s.communicate(timeout=a.seconds + 60)
            for k, raw in raws.items():
                if raw.exists() and not a.no_spy:
                    report = a.out / f"profile-replication-{k}.txt"
                    report.write_text(
                        f"kafkad {k}, RF 3 acks={a.acks} x{a.connections}\n" + fold(raw.read_text())
                    )
                    print(report.read_text()[:6000])
    finally:
        pool.close()
        if not a.keep:  # each run writes GBs of logs: 23 abandoned dirs filled the disk once
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
