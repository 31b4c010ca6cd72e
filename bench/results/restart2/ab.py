"""Interleaved A/B of the bench recovery row's steps on one 10 GiB / 100 partition data set.
Per run: clean start, 64 MiB tail, kill -9, start (timed: serving = started line + connect), wait until
every partition is loaded, stop, start (timed: clean restart), stop. argv: rounds, sides name=path..."""
import asyncio, os, re, statistics, sys, time, json
from pathlib import Path
sys.path.insert(0, "/work/wt/restart2")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
from tests.bench.raw_client import bulk_load
from tests.bench.servers import BROKER_DEFAULTS
from tests.integration.broker_process import BrokerProcess
rounds = int(sys.argv[1]); work = Path(sys.argv[2])
sides = dict(a.split("=", 1) for a in sys.argv[3:])
ov = {**BROKER_DEFAULTS, "log.flush.offset.checkpoint.interval.ms": "60000"}
res = {s: {k: [] for k in ("serve", "loaded", "clean", "exec", "exec_loaded", "logs", "load1")} for s in sides}
def use(side):
    os.environ["PYTHONPATH"] = sides[side]
    os.environ["PYTHONPYCACHEPREFIX"] = f"/tmp/r2/pycache-{side}"
def wait_loaded(b, t0):
    while True:
        text = b.log_text()
        if "; loading " not in text or "every partition is loaded" in text:
            return time.monotonic() - t0, text
        time.sleep(0.02)
names = list(sides)
for r in range(rounds):
    for side in (names if r % 2 == 0 else names[::-1]):
        use(side)
        b = BrokerProcess(work / "kafkad", ov, startup_timeout_s=300)
        b.start()
        asyncio.run(bulk_load("127.0.0.1", b.port, "recovery_p100", 100, 64 << 20, 1024))
        b.kill9()
        load1 = os.getloadavg()[0]
        b.wait_loaded = False
        t = time.monotonic(); b.start(); serve = time.monotonic() - t
        loaded, text = wait_loaded(b, t)
        m = re.search(r"; ([0-9.]+) s after exec \(logs ([0-9.]+) s\)", text)
        m2 = re.search(r"every partition is loaded; ([0-9.]+) s after exec", text)
        b.stop()
        b.wait_loaded = True
        t = time.monotonic(); b.start(); clean = time.monotonic() - t
        b.stop()
        x = res[side]
        x["serve"].append(serve); x["loaded"].append(loaded); x["clean"].append(clean)
        x["exec"].append(float(m.group(1))); x["logs"].append(float(m.group(2)))
        x["exec_loaded"].append(float(m2.group(1)) if m2 else float(m.group(1))); x["load1"].append(load1)
        print(r, side, {k: round(v[-1], 3) for k, v in x.items()}, flush=True)
json.dump(res, open(work / "ab.json", "w"))
for k in ("serve", "loaded", "clean", "exec", "exec_loaded", "logs"):
    line = f"{k:<12}"
    for s in names:
        v = res[s][k]; line += f" {s}: {min(v):.3f} / {statistics.median(v):.3f} / {max(v):.3f}  "
    if len(names) == 2:
        a, h = res[names[0]][k], res[names[1]][k]
        rat = [y / x for x, y in zip(a, h) if x]
        line += f" ratio {names[1]}/{names[0]} per pair: {min(rat):.2f} / {statistics.median(rat):.2f} / {max(rat):.2f}"
    print(line)
print("load1", {s: [round(x, 1) for x in res[s]["load1"]] for s in names})
