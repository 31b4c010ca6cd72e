"""py-spy profile of one start after a 64 MiB tail + kill -9 (the bench recovery row's run), code from argv[1]."""
import asyncio, os, signal, sys, time
from pathlib import Path
code, work, out = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
sys.path.insert(0, "/work/wt/restart2")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = f"/tmp/r2/pycache-{Path(code).name}"
os.environ["PYTHONPATH"] = code
import psutil
from tests.bench.raw_client import bulk_load
from tests.integration.broker_process import BrokerProcess
from tests.bench.servers import BROKER_DEFAULTS
ov = {**BROKER_DEFAULTS, "log.flush.offset.checkpoint.interval.ms": "60000"}
b = BrokerProcess(work / "kafkad", ov, startup_timeout_s=120)
b.start()
asyncio.run(bulk_load("127.0.0.1", b.port, "recovery_p100", 100, 64 << 20, 1024))
b.kill9()
p = BrokerProcess(work / "kafkad", ov, port=b.port, startup_timeout_s=120,
                  command_prefix=["/work/wt/restart2/.venv/bin/py-spy", "record", "-r", "1000", "-o", out, "-f", "raw", "--"])
t = time.monotonic()
p.start()
print("start", round(time.monotonic() - t, 3), flush=True)
kids = psutil.Process(p.pid).children()
os.kill(p.pid, signal.SIGINT)
p.proc.wait()
time.sleep(0.5)
for k in kids:
    k.terminate(); k.wait(30)
print([l for l in p.log_text().splitlines() if "loaded" in l or "started" in l])
