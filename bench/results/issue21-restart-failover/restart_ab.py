import os; os.makedirs("/tmp/rp", exist_ok=True)  # noqa: E702 - work dirs and logs go there
"""A/B of log.recovery.point.flush.ms (0 = main's behaviour) on the bench's recovery procedure: fresh bulk
load, 64 MiB tail, kill -9, restart (timed), stop, 64 MiB tail, kill -9, restart (timed), clean restart."""
import asyncio, sys, time, os, statistics, shutil
from pathlib import Path
sys.path.insert(0, os.getcwd())
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = "/tmp/rp/pycache"
from tests.bench.raw_client import bulk_load
from tests.bench.servers import create_topic, start_broker

gib = float(sys.argv[1]); rounds = int(sys.argv[2]); values = sys.argv[3].split(",")
res = {v: {"after_bulk": [], "tail": [], "clean": []} for v in values}
for r in range(rounds):
    for v in (values if r % 2 == 0 else values[::-1]):
        work = Path(f"/tmp/rp/ab-{v}")
        shutil.rmtree(work, ignore_errors=True)
        b = start_broker(work, {"log.flush.offset.checkpoint.interval.ms": "60000", "log.recovery.point.flush.ms": v})
        create_topic(b.bootstrap, "t", 100)
        asyncio.run(bulk_load("127.0.0.1", b.port, "t", 100, int(gib * (1 << 30)), 1024))
        asyncio.run(bulk_load("127.0.0.1", b.port, "t", 100, 64 << 20, 1024))
        b.kill9(); t = time.monotonic(); b.start(); res[v]["after_bulk"].append(time.monotonic() - t)
        b.stop(); b.start()
        asyncio.run(bulk_load("127.0.0.1", b.port, "t", 100, 64 << 20, 1024))
        b.kill9(); t = time.monotonic(); b.start(); res[v]["tail"].append(time.monotonic() - t)
        b.stop(); t = time.monotonic(); b.start(); res[v]["clean"].append(time.monotonic() - t)
        b.stop()
        print(v, {k: round(x[-1], 3) for k, x in res[v].items()}, os.getloadavg()[0], flush=True)
        shutil.copy(work / "kafkad" / "kafkad.log", f"/tmp/rp/ab-{v}-{r}.log")
        shutil.rmtree(work, ignore_errors=True)
for v in values:
    for k, x in res[v].items():
        print(f"{v:>5} {k:<10} {min(x):.3f} / {statistics.median(x):.3f} / {max(x):.3f}")
