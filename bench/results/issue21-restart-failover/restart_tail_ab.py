import os; os.makedirs("/tmp/rp", exist_ok=True)  # noqa: E702 - work dirs and logs go there
"""Tail restarts (64 MiB unflushed after a clean start), key 0 vs 2000: 'after exec' and 'logs' from the started line."""
import asyncio, sys, time, os, statistics, shutil, re
from pathlib import Path
sys.path.insert(0, os.getcwd())
os.environ.pop("PYTHONDONTWRITEBYTECODE", None); os.environ["PYTHONPYCACHEPREFIX"] = "/tmp/rp/pycache2"
from tests.bench.raw_client import bulk_load
from tests.bench.servers import create_topic, start_broker
gib = float(sys.argv[1]); rounds = int(sys.argv[2])
res = {v: {"spawn-to-ready": [], "after exec": [], "logs": []} for v in ("0", "2000")}
brokers = {}
for v in ("0", "2000"):
    work = Path(f"/tmp/rp/tail-{v}"); shutil.rmtree(work, ignore_errors=True)
    b = start_broker(work, {"log.flush.offset.checkpoint.interval.ms": "60000", "log.recovery.point.flush.ms": v})
    create_topic(b.bootstrap, "t", 100)
    asyncio.run(bulk_load("127.0.0.1", b.port, "t", 100, int(gib * (1 << 30)), 1024))
    b.stop(); brokers[v] = b
for r in range(rounds):
    for v in (("0", "2000") if r % 2 == 0 else ("2000", "0")):
        b = brokers[v]; b.start()
        asyncio.run(bulk_load("127.0.0.1", b.port, "t", 100, 64 << 20, 1024))
        b.kill9(); t = time.monotonic(); b.start(); res[v]["spawn-to-ready"].append(time.monotonic() - t)
        m = re.findall(r"; ([0-9.]+) s after exec \(logs ([0-9.]+) s\)", b.log_text())[-1]
        res[v]["after exec"].append(float(m[0])); res[v]["logs"].append(float(m[1]))
        b.stop()
        print(v, [round(x[-1], 3) for x in res[v].values()], os.getloadavg()[0], flush=True)
for v in res:
    for k, x in res[v].items():
        print(f"{v:>5} {k:<15} {min(x):.3f} / {statistics.median(x):.3f} / {max(x):.3f}")
for v in ("0", "2000"): shutil.rmtree(f"/tmp/rp/tail-{v}", ignore_errors=True)
