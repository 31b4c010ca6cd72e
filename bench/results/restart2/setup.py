"""Make the 10 GiB / 100 partition data set once (the bench recovery row's steps), then stop cleanly."""
import asyncio, os, sys, time
from pathlib import Path
sys.path.insert(0, "/work/wt/restart2")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = "/tmp/r2/pycache"
from tests.bench.raw_client import bulk_load
from tests.bench.servers import create_topic, start_broker
gib = float(sys.argv[1])
work = Path(sys.argv[2])
b = start_broker(work, {"log.flush.offset.checkpoint.interval.ms": "60000"})
create_topic(b.bootstrap, "recovery_p100", 100)
t = time.monotonic()
asyncio.run(bulk_load("127.0.0.1", b.port, "recovery_p100", 100, int(gib * (1 << 30)), 1024))
print("loaded", gib, "GiB in", round(time.monotonic() - t, 1), "s", flush=True)
b.stop()
print(work)
