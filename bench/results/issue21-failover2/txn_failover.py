"""Transaction coordinator failover driver (the transactions scenario's failover steps, tests/bench/
scenario_transactions.py): kill -9 of the broker leading the committer's __transaction_state partition;
prints the next commit and the ZooKeeper expiry after the kill, with the kill's wall time (for the logs).
usage: FO_WORK=dir python txn_failover.py RUNS"""
import os, sys, time, logging, statistics, subprocess
from pathlib import Path
sys.path.insert(0, os.getcwd())
from kafkad.coordinator.group.records import partition_for
from tests.bench.cluster_env import ZkGoneWatch, cluster_env, create_topic
from tests.bench.scenario_transactions import TXN_BROKER, STATE_PARTITIONS, _Committer, _after, _full_isr

logging.basicConfig(level=logging.WARNING)
runs = int(sys.argv[1])
work = Path(os.environ.get("FO_WORK", "/tmp/fo2/txn")) / "txn-failover"
subprocess.run(["rm", "-rf", str(work)])
overrides = {**TXN_BROKER, "transaction.state.log.replication.factor": "3",
             "transaction.state.log.min.isr": "2", "min.insync.replicas": "2"}
txn_id = "bench-failover"
sp = partition_for(txn_id, STATE_PARTITIONS)
after = []
with cluster_env(work, overrides) as c:
    create_topic(c, "fo", [[1, 2, 3]], {"min.insync.replicas": "2"})
    if os.environ.get("FO_BOTH"):  # the coordinator's partition led where the data partition is: both fail over
        create_topic(c, "__transaction_state", [[1, 2, 3]] * STATE_PARTITIONS,
                     {"cleanup.policy": "compact", "min.insync.replicas": "2", "compression.type": "uncompressed"})
    committer = _Committer(c.bootstrap, txn_id)
    committer.start()
    try:
        c.wait_until(lambda: len(committer.commits) >= 10, 120, "transactions committing")
        for i in range(runs):
            state = c.partition_state("__transaction_state", sp)
            victim = state.leader
            data = c.partition_state("fo", 0)
            gone = ZkGoneWatch(c, victim)
            t0 = time.monotonic(); w0 = time.time()
            c.kill9(victim)
            c.wait_until(_after(committer.commits, t0), 120, "a commit after the kill")
            t = min(x for x in committer.commits if x > t0) - t0
            exp = gone.wait(60) - t0
            after.append(t - exp)
            print(f"txn kill {i}: broker {victim} (data leader too: {data.leader == victim}) expiry {exp:.3f} "
                  f"commit {t:.3f} after expiry {t - exp:.3f} (kill at {time.strftime('%H:%M:%S', time.gmtime(w0))}"
                  f".{int(w0 % 1 * 1000):03d} UTC)", flush=True)
            c.restart(victim)
            c.wait_until(lambda: _full_isr(c, sp), 120, "__transaction_state ISR full again")
            time.sleep(1)
    finally:
        committer.stop_event.set()
        committer.join(60)
print(f"errors: {committer.errors[-10:]}")
if after:
    print(f"txn failover, commit after expiry: {min(after):.3f} / {statistics.median(after):.3f} / {max(after):.3f}")
