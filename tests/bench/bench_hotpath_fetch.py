"""Broker CPU per GiB served by Fetch catch-up, against plain os.sendfile of the same files, same run.

How it works: one kafkad (the working tree's code) gets `--mib` MiB of 1 KiB records in one partition;
then, `--runs` times, the raw sendfile server and kafkad are each read back-to-back by a client in a
separate worker process (the bench's raw_drain / raw_fetch jobs), `--passes` full reads per measurement
so psutil's 10 ms CPU ticks stay small against the total. Prints min / median / max of MB/s and server
CPU-s/GiB for both and the run-by-run ratios (kafkad / sendfile).

Run: .venv/bin/python -m tests.bench.bench_hotpath_fetch [--runs 5] [--mib 256] [--passes 8]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
from pathlib import Path

from tests.bench.raw_client import bulk_load
from tests.bench.servers import ChildServer, CpuMeter, Target, broker_target, create_topic, start_broker
from tests.bench.workers import Job, Pool

log = logging.getLogger("bench.fetch")
GiB = 1 << 30
TOPIC = "fetchsrc"


def measure(pool: Pool, target: Target, job: Job, passes: int) -> tuple[float, float]:
    """(MB/s, server CPU-s per GiB) over `passes` back-to-back reads."""
    meter = CpuMeter(target)
    meter.start()
    nbytes, seconds = 0, 0.0
    for _ in range(passes):
        r = pool.run([job]).results[0]
        nbytes += r["bytes"]
        seconds += r["s"]
    meter.stop()
    return nbytes / seconds / 1e6, meter.seconds / (nbytes / GiB)


def spread(values: list[float], digits: int = 3) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--passes", type=int, default=8)
    p.add_argument("--max-bytes", type=int, default=8 << 20)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    with tempfile.TemporaryDirectory(prefix="kafkad-fetchbench-") as tmp:
        work = Path(tmp)
        broker = start_broker(work)
        pool = Pool(1)
        sendfile: ChildServer | None = None
        try:
            create_topic(broker.bootstrap, TOPIC, 1)
            records = asyncio.run(bulk_load("127.0.0.1", broker.port, TOPIC, 1, a.mib << 20, 1024))
            files = sorted(str(f) for f in (broker.data_dir / f"{TOPIC}-0").glob("*.log"))
            sendfile = ChildServer("sendfile", "tests.bench.sendfile_server", files, work / "sendfile.log")
            kafkad = broker_target(broker)
            fetch = Job(
                "raw_fetch",
                {"port": broker.port, "topic": TOPIC, "end_offset": records, "max_bytes": a.max_bytes},
            )
            drain = Job("raw_drain", {"port": sendfile.port})
            measure(pool, kafkad, fetch, 1)  # warm-up: page cache, connection paths
            base: list[tuple[float, float]] = []
            ours: list[tuple[float, float]] = []
            for i in range(a.runs):
                base.append(measure(pool, sendfile.target, drain, a.passes))
                ours.append(measure(pool, kafkad, fetch, a.passes))
                log.info(
                    "run %d: sendfile %.0f MB/s %.3f cpu-s/GiB; kafkad %.0f MB/s %.3f cpu-s/GiB",
                    i,
                    *base[-1],
                    *ours[-1],
                )
        finally:
            if sendfile is not None:
                sendfile.stop()
            pool.close()
            broker.stop()
    print(f"sendfile MB/s      {spread([b[0] for b in base], 0)}")
    print(f"kafkad   MB/s      {spread([o[0] for o in ours], 0)}")
    print(f"ratio    MB/s      {spread([o[0] / b[0] for o, b in zip(ours, base, strict=True)])}")
    print(f"sendfile cpu-s/GiB {spread([b[1] for b in base])}")
    print(f"kafkad   cpu-s/GiB {spread([o[1] for o in ours])}")
    print(f"ratio    cpu/GiB   {spread([o[1] / b[1] for o, b in zip(ours, base, strict=True)])}")


if __name__ == "__main__":
    main()
