import os; os.makedirs("/tmp/rp", exist_ok=True)  # noqa: E702 - work dirs and logs go there
"""The 2-core cost of log.recovery.point.flush.ms: bulk-load rate and broker CPU per GiB, 0 vs 2000, interleaved."""
import asyncio, sys, time, os, statistics, shutil
from pathlib import Path
sys.path.insert(0, os.getcwd())
import psutil
from tests.bench.raw_client import bulk_load
from tests.bench.servers import create_topic, start_broker
gib = float(sys.argv[1]); rounds = int(sys.argv[2])
res = {v: {"MB/s": [], "cpu-s/GiB": [], "fsyncs": []} for v in ("0", "2000")}
for r in range(rounds):
    for v in (("0", "2000") if r % 2 == 0 else ("2000", "0")):
        work = Path(f"/tmp/rp/cost-{v}"); shutil.rmtree(work, ignore_errors=True)
        b = start_broker(work, {"log.recovery.point.flush.ms": v})
        create_topic(b.bootstrap, "t", 100)
        p = psutil.Process(b.pid); c0 = sum(p.cpu_times()[:4]); t0 = time.monotonic()
        asyncio.run(bulk_load("127.0.0.1", b.port, "t", 100, int(gib * (1 << 30)), 1024))
        wall = time.monotonic() - t0; cpu = sum(p.cpu_times()[:4]) - c0
        res[v]["MB/s"].append(gib * 1073.741824 / wall); res[v]["cpu-s/GiB"].append(cpu / gib)
        b.stop()
        res[v]["fsyncs"].append(0)
        print(v, round(res[v]["MB/s"][-1]), round(res[v]["cpu-s/GiB"][-1], 2), "load", os.getloadavg()[0], flush=True)
        shutil.rmtree(work, ignore_errors=True)
for v in res:
    for k in ("MB/s", "cpu-s/GiB"):
        x = res[v][k]; print(f"{v:>5} {k:<10} {min(x):.2f} / {statistics.median(x):.2f} / {max(x):.2f}")
