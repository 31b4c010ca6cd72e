"""`make chaos`: a chaos run from the command line, with a JSON report and an SVG plot in --out.

    python -m tests.chaos.main [--mode long|short] [--cycles N] [--seed S] [--env cluster|standalone]
                               [--no-netns] [--nemeses a,b,...] [--out DIR]

long (default): >= 100 cycles over every nemesis the environment offers (cluster: 3 brokers in network
namespaces on a 3-node ZooKeeper ensemble). short: one cycle of each. Exit status 0 when the history is
valid (no anomaly, every fault recovered), 1 otherwise. Needs root (namespaces, tmpfs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.chaos import wan
from tests.chaos.envs import ChaosEnv, cluster_env, standalone_env
from tests.chaos.history import History
from tests.chaos.runner import run_chaos
from tests.chaos.workload import Workload


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="chaos", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--mode", choices=("long", "short"), default="long")
    ap.add_argument("--cycles", type=int, default=None, help="default: 100 (long), one per nemesis (short)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--env", choices=("cluster", "standalone"), default="cluster")
    ap.add_argument("--no-netns", action="store_true", help="cluster on loopback (no partition nemeses)")
    ap.add_argument("--nemeses", default=None, help="comma-separated names (default: all available)")
    ap.add_argument("--out", type=Path, default=Path("chaos-report"))
    ap.add_argument("--rate", type=float, default=50.0, help="sends per second per writer (2 writers)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kazoo", "chaos.rdkafka"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    tmp = tempfile.mkdtemp(prefix="kafkad-chaos-")
    res = None
    try:
        with _env(args, Path(tmp)) as env:
            nemeses = env.nemeses(args.nemeses.split(",") if args.nemeses else None)
            cycles = args.cycles or (100 if args.mode == "long" else len(nemeses))
            w = Workload(History(), env.bootstrap, env.topic, env.partitions, writers=2, rate=args.rate)
            res = run_chaos(
                w, nemeses, cycles=cycles, seed=seed, out_dir=args.out, hold=(1.0, 4.0), quiet=(0.5, 2.0),
                healthy=env.healthy, describe=env.describe, recover_timeout_s=90.0,
            )  # fmt: skip
    except AssertionError as e:  # the brokers' log gate, checked as the environment closes
        if res is None:
            raise
        res.errors.append(f"broker logs: {e}"[-6000:])
    ops, faults = res.history.snapshot()
    lossy = wan.report(nemeses, ops, faults, res.report.windows)
    if lossy:  # figures of the lossy-link nemeses (tests/chaos/wan.py)
        (args.out / "chaos-wan.json").write_text(json.dumps(lossy, indent=1))
        for name, fig in sorted(lossy.items()):
            print(f"{name:20s} {json.dumps({k: v for k, v in fig.items() if k != 'per_cycle'})}")
    summary = {"seed": seed, "valid": res.valid, **res.report.summary()}
    print(json.dumps(summary, indent=1))
    for name, fig in sorted(res.per_nemesis.items()):
        u = fig["unavailability"]
        print(
            f"{name:34s} cycles {fig['cycles']:3d} acked {fig['acked']:6d} lost {fig['lost']} "
            f"unavailable p50 {u['p50_s']:.2f}s p99 {u['p99_s']:.2f}s max {u['max_s']:.2f}s"
        )
    if not res.valid:  # the brokers' and ZooKeeper's logs stay for the diagnosis
        print(res.explain(), file=sys.stderr)
        print(f"logs of the brokers and ZooKeeper kept in {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if res.valid else 1


@contextlib.contextmanager
def _env(args: argparse.Namespace, base: Path) -> Iterator[ChaosEnv]:
    if args.env == "standalone":
        with standalone_env(base) as env:
            yield env
    else:
        with cluster_env(base, netns=not args.no_netns) as env:
            yield env


if __name__ == "__main__":
    sys.exit(main())
