import os; WORK = os.environ.get("FO_WORK", "/tmp/fo2/run"); os.makedirs(WORK, exist_ok=True)  # noqa: E702 - work dirs and logs go there
"""Failover driver: kill -9 of the leader of N partitions (writable - expiry) and of the controller
(CreateTopics - new /controller), optional py-spy of the controller/survivors."""
import sys, os, time, subprocess, logging, statistics
from pathlib import Path
sys.path.insert(0, os.getcwd())
from tests.bench.cluster_env import ZkGoneWatch, cluster_env, create_topic, probe_writable, wait_led_by, elect_preferred, states
from tests.cluster.cluster import wait_until
from tests.cluster.test_election import create_topic as create_topic_rf

logging.basicConfig(level=logging.WARNING)
N = int(sys.argv[1]); leader_runs = int(sys.argv[2]); ctrl_runs = int(sys.argv[3]); spy = sys.argv[4] if len(sys.argv) > 4 else ""
work = Path(WORK) / "fo"; subprocess.run(["rm", "-rf", str(work)])
PYSPY = os.path.join(os.getcwd(), ".venv/bin/py-spy")

def spy_on(pid, name):
    return subprocess.Popen([PYSPY, "record", "--pid", str(pid), "--nonblocking", "-r", "250", "-f", "raw", "-o", f"{WORK}/{name}.raw", "-d", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

with cluster_env(work) as c:
    ctrl = c.wait_controller()
    a, b = (x for x in c.ids if x != ctrl)
    rest = [x for x in c.ids if x != b]
    create_topic(c, f"fo{N}", [[b, *rest]] * N)
    wait_led_by(c, f"fo{N}", N, b, 3, 180)
    after = []
    for i in range(leader_runs):
        ctrl = c.wait_controller(exclude=[b])
        gone = ZkGoneWatch(c, b)
        p = spy_on(c.broker(ctrl).pid, f"leader-kill-ctrl-{i}") if "leader" in spy else None
        p2 = spy_on(c.broker(rest[0]).pid, f"leader-kill-newleader-{i}") if "newleader" in spy else None
        p3 = spy_on(c.broker(rest[1]).pid, f"leader-kill-follower-{i}") if "newleader" in spy else None
        t0 = time.monotonic(); w0 = time.time()
        c.kill9(b)
        done = probe_writable(c, b, f"fo{N}", range(N), t0)
        exp = gone.wait(60) - t0
        after.append(max(done.values()) - exp)
        print(f"leader kill {i}: expiry {exp:.3f} all writable {max(done.values()):.3f} after expiry {after[-1]:.3f} first {min(done.values())-exp:.3f} (kill at {time.strftime('%H:%M:%S', time.gmtime(w0))}.{int(w0 % 1 * 1000):03d} UTC, expiry at +{exp:.3f})", flush=True)
        for q in (p, p2, p3):
            if q: q.wait()
        c.broker(b).start(); c.wait_registered([b], timeout_s=60)
        c.wait_until(lambda: all(st is not None and b in st[1] for st in states(c, f"fo{N}", N)), 180, "isr")
        elect_preferred(c, f"fo{N}", N); wait_led_by(c, f"fo{N}", N, b, 3, 120)
    if after:
        print(f"leader kill, writable after expiry: {min(after):.3f} / {statistics.median(after):.3f} / {max(after):.3f}")
    ctl = []
    for i in range(ctrl_runs):
        ctrl = c.wait_controller()
        gone = ZkGoneWatch(c, ctrl)
        spies = [spy_on(c.broker(x).pid, f"ctrl-kill-{x}-{i}") for x in c.ids if x != ctrl] if "ctrl" in spy else []
        t0 = time.monotonic(); w0 = time.time(); c.kill9(ctrl)
        def new_controller(ctrl=ctrl):
            x = c.controller_id(); return x if x is not None and x != ctrl else None
        new = wait_until(new_controller, 60, "new controller", interval_s=0.005)
        tn = time.monotonic() - t0
        survivor = c.broker(next(x for x in c.ids if x != ctrl)).bootstrap
        wait_until(lambda: create_topic_rf(survivor, f"ctl-{i}", 1, 2)["error_code"] == 0, 60, "create", interval_s=0.01)
        tc = time.monotonic() - t0
        ctl.append(tc - tn)
        print(f"controller kill {i}: new {new} after {tn:.3f}, CreateTopics after election {tc - tn:.3f} (kill at {time.strftime('%H:%M:%S', time.gmtime(w0))}.{int(w0 % 1 * 1000):03d} UTC)", flush=True)
        for s in spies: s.wait()
        c.broker(ctrl).start(); c.wait_registered([ctrl], timeout_s=60)
    if ctl:
        print(f"controller kill, CreateTopics after election: {min(ctl):.3f} / {statistics.median(ctl):.3f} / {max(ctl):.3f}")
