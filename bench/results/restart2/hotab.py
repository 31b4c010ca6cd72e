"""Interleaved A/B of the standalone produce/fetch paths: broker CPU per GiB for a 512 MiB raw produce
(1 MiB batches) and its raw fetch back, and broker CPU per small request (1-record Produce, 8
connections x depth 5, 3 s). argv: pairs, name=path name=path."""
import asyncio, os, shutil, statistics, sys, time
from pathlib import Path
sys.path.insert(0, "/work/wt/restart2")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
import psutil
from tests.bench.raw_client import bulk_load, fetch_all, make_batch, pipelined_produce
from tests.bench.servers import BROKER_DEFAULTS, create_topic
from tests.integration.broker_process import BrokerProcess
pairs = int(sys.argv[1]); sides = dict(a.split("=", 1) for a in sys.argv[2:]); names = list(sides)
res = {s: {"produce": [], "fetch": [], "small": []} for s in names}
def cpu(pid):
    t = psutil.Process(pid).cpu_times(); return t.user + t.system
async def nothing(): return None
for r in range(pairs):
    for side in (names if r % 2 == 0 else names[::-1]):
        os.environ["PYTHONPATH"] = sides[side]; os.environ["PYTHONPYCACHEPREFIX"] = f"/tmp/r2/pycache-{side}"
        work = Path(f"/tmp/r2/hot-{side}"); shutil.rmtree(work, ignore_errors=True)
        b = BrokerProcess(work, dict(BROKER_DEFAULTS), startup_timeout_s=120); b.start()
        try:
            create_topic(b.bootstrap, "big", 1); create_topic(b.bootstrap, "small", 1)
            size = 512 << 20
            c0 = cpu(b.pid); asyncio.run(bulk_load("127.0.0.1", b.port, "big", 1, size, 1024)); c1 = cpu(b.pid)
            n_rec = size // 1034 // 1014 * 1014  # approximately: fetch to the end below
            total, _ = fetch_all("127.0.0.1", b.port, "big", 500_000 // 1014 * 1014 - 1014)
            c2 = cpu(b.pid)
            batch = make_batch(100, 1)
            c3 = cpu(b.pid)
            count, el = asyncio.run(pipelined_produce("127.0.0.1", b.port, "small", 8, 3.0, batch, 1, nothing))
            c4 = cpu(b.pid)
            x = res[side]
            x["produce"].append((c1 - c0) / (size / (1 << 30)))
            x["fetch"].append((c2 - c1) / (total / (1 << 30)))
            x["small"].append((c4 - c3) / count * 1e6)
            print(r, side, {k: round(v[-1], 3) for k, v in x.items()}, "load", os.getloadavg()[0], flush=True)
        finally:
            b.stop(); shutil.rmtree(work, ignore_errors=True)
for k, unit in (("produce", "CPU-s/GiB"), ("fetch", "CPU-s/GiB"), ("small", "CPU-us/request")):
    a, h = res[names[0]][k], res[names[1]][k]
    rat = [y / x for x, y in zip(a, h)]
    print(f"{k:<8} {unit:<15} {names[0]} {min(a):.3f}/{statistics.median(a):.3f}/{max(a):.3f}  {names[1]} {min(h):.3f}/{statistics.median(h):.3f}/{max(h):.3f}  ratio {min(rat):.2f}/{statistics.median(rat):.2f}/{max(rat):.2f}")
