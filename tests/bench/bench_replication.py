"""Replication benchmark (issue 11's speed figures), every figure beside a baseline of the same run.

Run: .venv/bin/python -m tests.bench.bench_replication [--runs 3] [--seconds 6] [--catchup-mb 256]

A real ZooKeeper and three kafkad (tests/cluster harness), one topic per mode, RF 3, min.insync.replicas=2:
1. acks=all vs acks=1 throughput: one confluent-kafka producer process (tests/bench/jobs.produce_throughput,
   100-byte records as in Kafka's 2014 figure), the modes alternating run by run; ratio = all / 1 per run.
2. Follower CPU per GiB replicated during the acks=all runs (the two followers' CPU seconds over the bytes
   they appended), against a plain os.sendfile of the same bytes over loopback plus an append of them to a
   file (sender and receiver CPU), measured right after; ratio = follower / baseline.
3. Catch-up: one follower stopped, --catchup-mb written, the follower started; MB/s from its start to its
   log end reaching the leader's, against raw loopback sendfile MB/s of the same segment files.
Prints min / median / max of every figure; the machine is shared, so read ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil

from tests.bench.workers import Job, Pool
from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import create_topic
from tests.cluster.zookeeper import ZooKeeperServer

GiB = 1 << 30
OVERRIDES = {
    "min.insync.replicas": "2",
    "replica.fetch.wait.max.ms": "500",
    "replica.lag.time.max.ms": "30000",
    "log.flush.interval.ms": "9223372036854775807",
    "log.segment.bytes": str(256 << 20),
}


def _cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def _log_bytes(c: KafkadCluster, bid: int, topic: str) -> int:
    d = c.broker(bid).data_dir / f"{topic}-0"
    return sum(p.stat().st_size for p in d.glob("*.log"))


def _stats(xs: list[float]) -> str:
    return f"{min(xs):.3g} / {statistics.median(xs):.3g} / {max(xs):.3g}"


def _sendfile_baseline(files: list[Path]) -> tuple[float, float]:
    """(CPU seconds per GiB, MB/s) of sendfile over loopback + append to a file, sender and receiver."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    total = sum(f.stat().st_size for f in files)
    out_dir = tempfile.mkdtemp(prefix="sendfile-baseline-")

    def receive() -> None:
        conn, _ = srv.accept()
        with conn, open(os.path.join(out_dir, "copy.log"), "ab") as out:
            buf = bytearray(1 << 20)
            view = memoryview(buf)
            left = total
            while left:
                n = conn.recv_into(view, min(len(buf), left))
                if not n:
                    break
                out.write(view[:n])
                left -= n

    t = threading.Thread(target=receive)
    me = psutil.Process()
    c0 = me.cpu_times()
    w0 = time.monotonic()
    t.start()
    with socket.create_connection(("127.0.0.1", port)) as s:
        for f in files:
            with open(f, "rb") as fh:
                size = f.stat().st_size
                off = 0
                while off < size:
                    off += os.sendfile(s.fileno(), fh.fileno(), off, size - off)
    t.join()
    wall = time.monotonic() - w0
    c1 = me.cpu_times()
    srv.close()
    for p in Path(out_dir).iterdir():
        p.unlink()
    os.rmdir(out_dir)
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    return cpu / (total / GiB), total / wall / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--catchup-mb", type=int, default=256)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-replication-"))
    zk = ZooKeeperServer(work / "zk")
    zk.start()
    c = KafkadCluster(work / "cluster", zk.connect_string, 3, overrides=OVERRIDES)
    pool = Pool(1)
    try:
        c.start()
        c.wait_registered([1, 2, 3], timeout_s=60)
        c.wait_controller(timeout_s=60)
        topics = {"1": "bench-acks1", "all": "bench-acksall"}
        for t in topics.values():
            assert create_topic(c.bootstrap.split(",")[0], t, 1, 3)["error_code"] == 0
            c.wait_until(lambda t=t: (s := c.partition_state(t, 0)) and len(s.isr) == 3 and s, 60, "ISR")
        rates: dict[str, list[float]] = {"1": [], "all": []}
        ratios: list[float] = []
        follower_cpu: list[float] = []
        for run in range(args.runs):
            order = ["1", "all"] if run % 2 == 0 else ["all", "1"]
            got: dict[str, float] = {}
            for acks in order:
                topic = topics[acks]
                leader = c.partition_state(topic, 0).leader  # type: ignore[union-attr]
                followers = [b for b in c.ids if b != leader]
                pids = {b: c.broker(b).proc.pid for b in followers}  # type: ignore[union-attr]
                before = {b: (_cpu(pids[b]), _log_bytes(c, b, topic)) for b in followers}
                job = Job(
                    "produce_throughput",
                    {
                        "bootstrap": c.bootstrap,
                        "topic": topic,
                        "size": args.size,
                        "duration_s": args.seconds,
                        "config": {"acks": acks, "linger.ms": 5, "batch.size": 1 << 20},
                    },
                )
                r = pool.run([job]).results[0]
                got[acks] = r["records"] / r["s"]
                rates[acks].append(got[acks])
                if acks == "all":
                    cpu = sum(_cpu(pids[b]) - before[b][0] for b in followers)
                    moved = sum(_log_bytes(c, b, topic) - before[b][1] for b in followers)
                    follower_cpu.append(cpu / (moved / GiB))
            ratios.append(got["all"] / got["1"])
            print(f"run {run}: acks=1 {got['1']:.0f} rec/s, acks=all {got['all']:.0f} rec/s", flush=True)
        leader = c.partition_state(topics["all"], 0).leader  # type: ignore[union-attr]
        files = sorted((c.broker(leader).data_dir / f"{topics['all']}-0").glob("*.log"))
        base_cpu, base_mbs = [], []
        for _ in range(args.runs):
            cpu, mbs = _sendfile_baseline(files)
            base_cpu.append(cpu)
            base_mbs.append(mbs)
        # catch-up of a follower that missed --catchup-mb
        topic = topics["1"]
        leader = c.partition_state(topic, 0).leader  # type: ignore[union-attr]
        lagger = next(b for b in c.ids if b != leader)
        c.broker(lagger).stop()
        start_bytes = _log_bytes(c, leader, topic)
        big = Job(
            "produce_throughput",
            {
                "bootstrap": c.bootstrap,
                "topic": topic,
                "size": 10000,
                "duration_s": 1.0,
                "config": {"acks": "1", "linger.ms": 20, "batch.size": 1 << 20},
            },
        )
        while _log_bytes(c, leader, topic) - start_bytes < args.catchup_mb << 20:
            pool.run([big])
        target = _log_bytes(c, leader, topic)
        have = _log_bytes(c, lagger, topic)
        missed = target - have
        c.broker(lagger).start()
        proc = c.broker(lagger).proc
        assert proc is not None
        c.wait_until(lambda: _log_bytes(c, lagger, topic) > have or None, 120, "catch-up start")
        t0, cpu0, from_bytes = time.monotonic(), _cpu(proc.pid), _log_bytes(c, lagger, topic)
        c.wait_until(lambda: _log_bytes(c, lagger, topic) >= target or None, 600, "catch-up")
        elapsed, cpu = time.monotonic() - t0, _cpu(proc.pid) - cpu0
        copied = target - from_bytes
        catchup = copied / elapsed / 1e6
        catchup_cpu = cpu / (copied / GiB)
        cfiles = sorted((c.broker(leader).data_dir / f"{topic}-0").glob("*.log"))
        raw_cpu, raw = _sendfile_baseline(cfiles)
        fc = [f / statistics.median(base_cpu) for f in follower_cpu]
        print()
        print("| figure | min / median / max | target |")
        print("|---|---|---|")
        print(f"| acks=1 records/s ({args.size} B) | {_stats(rates['1'])} | |")
        print(f"| acks=all records/s, RF 3 | {_stats(rates['all'])} | |")
        print(f"| acks=all / acks=1 (same run) | {_stats(ratios)} | >= 0.5 |")
        print(f"| follower CPU s per GiB replicated | {_stats(follower_cpu)} | |")
        print(f"| sendfile + append CPU s per GiB | {_stats(base_cpu)} | |")
        print(f"| follower CPU / sendfile+append | {_stats(fc)} | <= 1.5 |")
        print(f"| catch-up of {missed / 1e6:.0f} MB (10 kB records), MB/s | {catchup:.0f} | |")
        print(f"| raw loopback sendfile of the same files, MB/s | {raw:.0f} | |")
        print(f"| catch-up follower CPU s per GiB | {catchup_cpu:.3g} | |")
        print(f"| catch-up follower CPU / sendfile+append | {catchup_cpu / raw_cpu:.3g} | <= 1.5 |")
    finally:
        pool.close()
        c.stop()
        zk.stop()
        shutil.rmtree(work, ignore_errors=True)  # three brokers' copies of several GiB each


if __name__ == "__main__":
    main()
