"""`make chaos`, transactional part: the consume-transform-produce workload (txn_workload.py) under a long
randomised schedule, checked by txn_checker.py; JSON report and history in --out.

    python -m tests.chaos.txn_main [--mode long|short] [--cycles N] [--seed S] [--env cluster|standalone]
                                   [--nemeses a,b,...] [--out DIR]

long (default): 100 cycles over kill -9 of the transaction coordinator's broker, kill -9 and SIGTERM of an
output partition's leader, and a processor dying mid-transaction, against 3 brokers on a 3-node ZooKeeper
ensemble. short: one cycle of each. Exit status 0 when the history is valid. Needs root (tmpfs).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import tempfile
from pathlib import Path

from tests.chaos.envs import ChaosEnv, cluster_env, standalone_env
from tests.chaos.nemesis import Nemesis
from tests.chaos.txn_history import TxnHistory
from tests.chaos.txn_runner import KillProcessor, TxnCoordinatorKill, run_txn_chaos
from tests.chaos.txn_workload import TxnWorkload
from tests.chaos.workload import create_topic

SOURCE, SINK = "txn-in", "txn-out"
STATE_PARTITIONS = 5
NEMESES = ("kill9-txn-coordinator", "kill9-leader", "sigterm-leader", "kill-processor")
OVERRIDES = {
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
CLUSTER_OVERRIDES = {**OVERRIDES, "transaction.state.log.replication.factor": "3",
                     "transaction.state.log.min.isr": "2"}  # fmt: skip


def nemeses_for(env: ChaosEnv, w: TxnWorkload, names: list[str]) -> list[Nemesis]:
    out: list[Nemesis] = []
    for name in names:
        if name == "kill-processor":
            out.append(KillProcessor(w))
        elif name == "kill9-txn-coordinator":
            out.append(TxnCoordinatorKill(env.brokers, w, STATE_PARTITIONS))
        else:
            (nem,) = env.nemeses([name])
            nem.topic = SINK  # type: ignore[attr-defined]  # the output topic's leaders
            out.append(nem)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="txn-chaos", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--mode", choices=("long", "short"), default="long")
    ap.add_argument("--cycles", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--env", choices=("cluster", "standalone"), default="cluster")
    ap.add_argument("--nemeses", default=",".join(NEMESES))
    ap.add_argument("--out", type=Path, default=Path("chaos-report/transactions"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    names = args.nemeses.split(",")
    cycles = args.cycles or (100 if args.mode == "long" else len(names))
    tmp = Path(tempfile.mkdtemp(prefix="kafkad-txn-chaos-"))
    if args.env == "standalone":
        ctx = standalone_env(tmp, overrides=OVERRIDES)
        rf = 1
    else:
        ctx = cluster_env(tmp, overrides=CLUSTER_OVERRIDES)
        rf = 3
    with ctx as env:
        for topic in (SOURCE, SINK):
            create_topic(
                env.bootstrap, topic, env.partitions, rf, {"min.insync.replicas": "2"} if rf > 1 else {}
            )
        w = TxnWorkload(TxnHistory(), env.bootstrap, SOURCE, SINK, env.partitions, processors=2, rate=60)
        res = run_txn_chaos(
            w, nemeses_for(env, w, names), cycles=cycles, seed=seed, out_dir=args.out,
            hold=(1.0, 4.0), quiet=(1.0, 3.0), healthy=env.healthy,
        )  # fmt: skip
    print(json.dumps({"seed": seed, "valid": res.valid, **res.report.summary()}, indent=1))
    for name, fig in res.table().items():
        print(f"{name:24s} {json.dumps(fig)}")
    if res.valid:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(res.explain(), file=sys.stderr)
        print(f"logs of the brokers kept in {tmp}", file=sys.stderr)
    return 0 if res.valid else 1


if __name__ == "__main__":
    sys.exit(main())
