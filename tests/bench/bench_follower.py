"""A follower's CPU per GiB replicated, in this process, against a real kafkad leader (no ZooKeeper).

How it works: a standalone kafkad gets `--mib` MiB of 100-byte records in batches of `--batch-kb` KiB (the
size one acks=all produce request brings in the cluster benchmark). Then, `--runs` times, this process
runs the real follower path (kafkad.replication ReplicaFetcher, BrokerChannel, Partition, PartitionLog in
a temp dir, on uvloop as the daemon) from offset 0 to the leader's log end, with replica.fetch.max.bytes
= one batch, so every Fetch brings one batch as in the steady acks=all state; its process CPU per GiB is
set against the same run's plain os.sendfile over loopback + append to a file of the leader's segment
files (sender and receiver CPU, tests/bench/bench_replication._sendfile_baseline). A standalone leader
serves a replica_id >= 0 Fetch as a cluster leader does (up to its log end). `--cprofile` prints the
follower's top functions of the last run.

Run: .venv/bin/python -m tests.bench.bench_follower [--runs 3] [--mib 256] [--batch-kb 110] [--cprofile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import uvloop

from kafkad.clock import SystemClock
from kafkad.replication.fetcher import FetcherConfig, ReplicaFetcher
from kafkad.replication.partition import Partition
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog
from tests.bench.bench_replication import _sendfile_baseline
from tests.bench.raw_client import bulk_load, make_batch
from tests.bench.servers import create_topic, start_broker

GiB = 1 << 30
TOPIC = "follow"


async def follow(port: int, end: int, root: Path, batch_bytes: int) -> tuple[float, int, int]:
    """(CPU seconds, bytes appended, fetches) of one follower copying the partition up to offset `end`."""
    clock = SystemClock()
    plog = PartitionLog.open(root / f"{TOPIC}-0", LogConfig(), clock, recover=False)
    part = Partition(cast(Any, plog), 7)
    part.become_follower(0, 1, (1, 7), isr=(1, 7))
    cfg = FetcherConfig(broker_id=7, partition_max_bytes=batch_bytes, max_wait_ms=100)
    fetcher = ReplicaFetcher(1, "127.0.0.1", port, cfg, clock.time_ms)
    c0 = time.process_time()
    fetcher.add([part])
    try:
        while plog.log_end_offset < end:
            await asyncio.sleep(0.005)
    finally:
        await fetcher.stop()
    cpu = time.process_time() - c0
    plog.close()
    size = sum(p.stat().st_size for p in (root / f"{TOPIC}-0").glob("*.log"))
    return cpu, size, fetcher.fetches


def follow_sync(port: int, end: int, root: Path, batch_bytes: int) -> tuple[float, int, int]:
    """follow() without asyncio: a blocking socket, the same encoder, decoder and append (the floor)."""
    import socket
    import struct

    from kafkad.replication.fetch_request import FetchEncoder
    from kafkad.replication.fetch_response import decode_fetch_response
    from kafkad.storage.log_types import AppendOrigin

    clock = SystemClock()
    plog = PartitionLog.open(root / f"{TOPIC}-0", LogConfig(), clock, recover=False)
    cfg = FetcherConfig(broker_id=7, partition_max_bytes=batch_bytes, max_wait_ms=100)
    enc = FetchEncoder(cfg, "sync")
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = bytearray(4)
    n = 0
    c0 = time.process_time()
    while plog.log_end_offset < end:
        sock.sendall(enc.frame([(TOPIC, 0, -1, plog.log_end_offset, 0)]))
        sock.recv_into(head, 4, socket.MSG_WAITALL)
        frame = bytearray(struct.unpack(">i", head)[0])
        view = memoryview(frame)
        got = 0
        while got < len(frame):
            got += sock.recv_into(view[got:])
        _, parts = decode_fetch_response(frame)
        rec = parts[0].records
        if rec:
            plog.append(rec, leader_epoch=0, now_ms=0, origin=AppendOrigin.REPLICATION)
        n += 1
    cpu = time.process_time() - c0
    sock.close()
    plog.close()
    size = sum(p.stat().st_size for p in (root / f"{TOPIC}-0").glob("*.log"))
    return cpu, size, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--batch-kb", type=int, default=110)
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--sync", action="store_true", help="a blocking-socket follower loop (the floor)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-follower-"))
    broker = start_broker(work)
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        batch_bytes = args.batch_kb << 10
        records = asyncio.run(bulk_load("127.0.0.1", broker.port, TOPIC, 1, args.mib << 20, 100, batch_bytes))
        files = sorted((broker.data_dir / f"{TOPIC}-0").glob("*.log"))
        fetch_max = len(make_batch(100, max(1, batch_bytes // 110)))  # bulk_load's batch: one per fetch
        follower, base, fetches = [], [], []
        for run in range(args.runs):
            root = work / f"follower-{run}"
            prof = cProfile.Profile(time.thread_time) if args.cprofile and run == args.runs - 1 else None
            if prof is not None:
                prof.enable()
            if args.sync:
                cpu, size, n = follow_sync(broker.port, records, root, fetch_max)
            else:
                cpu, size, n = uvloop.run(follow(broker.port, records, root, fetch_max))
            if prof is not None:
                prof.disable()
            shutil.rmtree(root)
            follower.append(cpu / (size / GiB))
            fetches.append(size / n)
            base.append(_sendfile_baseline(files)[0])
            print(
                f"run {run}: follower {follower[-1]:.3f} cpu-s/GiB ({n} fetches of {size / n / 1e3:.0f} kB),"
                f" sendfile+append {base[-1]:.3f}, ratio {follower[-1] / base[-1]:.2f}",
                flush=True,
            )
        ratios = sorted(f / b for f, b in zip(follower, base, strict=True))

        def s(xs: list[float]) -> str:
            return f"{min(xs):.3f} / {statistics.median(xs):.3f} / {max(xs):.3f}"

        print(f"follower cpu-s/GiB         {s(follower)}")
        print(f"sendfile+append cpu-s/GiB  {s(base)}")
        print(f"ratio (same run)           {s(ratios)}")
        if args.cprofile and prof is not None:
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
