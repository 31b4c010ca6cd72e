"""Power-loss chaos scenarios (issue 18): one kind of power loss, one flush setting, each its own cluster.

    python -m tests.chaos.powerloss_scenarios [--mode long|short] [--scenarios a,b] [--cycles N]
                                              [--seed S] [--out DIR]

3 brokers (RF 3, min.insync.replicas=2) on a 3-node ZooKeeper ensemble, every log dir on its own LazyFS,
the chaos workload (idempotent acks=all producers, an assign() reader, a group consumer), and one nemesis:

- `rack-defaults`: whole-rack power loss with Kafka's defaults (no fsync before an answer). Acknowledged
  records are lost (the checker must see it: the proof that the nemesis works); still the replicas must
  converge (0 divergent batches on disk) and no corrupt record may be served;
- `one-defaults`: one appliance's power loss with the defaults: replication covers it, the history must be
  valid (0 lost, duplicated, divergent...);
- `rack-flush1`: whole-rack power loss with `log.flush.interval.messages=1` (the fsync comes before the
  answer, issue 18 items 1-2): the history must be valid.

short: 3 cycles each (inside `make test`, tests/chaos/test_chaos_powerloss.py); long (`make chaos`): 50 rack
power losses per rack scenario, 25 single ones. Figures per scenario (docs/chaos.md) are printed and
written to DIR/powerloss-figures.json; exit status 0 when every scenario met its expectation.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos.envs import cluster_env
from tests.chaos.history import History
from tests.chaos.powerloss import PowerLoss, figures, recovery_times, replica_divergence
from tests.chaos.runner import ChaosResult, run_chaos
from tests.chaos.workload import Workload

FLUSH_EACH = {"log.flush.interval.messages": "1"}


@dataclass(frozen=True)
class Scenario:
    kind: str  # "one" | "rack"
    overrides: dict[str, str]
    expect_loss: bool
    long_cycles: int


SCENARIOS = {
    "rack-defaults": Scenario("rack", {}, True, 50),
    "one-defaults": Scenario("one", {}, False, 25),
    "rack-flush1": Scenario("rack", FLUSH_EACH, False, 50),
}


@dataclass
class ScenarioResult:
    name: str
    chaos: ChaosResult
    divergent_replicas: list[dict[str, Any]]
    row: dict[str, Any]
    problems: list[str] = field(default_factory=list)


def run_scenario(
    name: str, base: Path, out: Path, *, cycles: int, seed: int, rate: float = 40.0
) -> ScenarioResult:
    sc = SCENARIOS[name]
    with cluster_env(base, lazyfs=True, overrides=sc.overrides) as env:
        (nem,) = env.nemeses([f"power-loss-{sc.kind}"])
        assert isinstance(nem, PowerLoss)
        h = History()
        w = Workload(h, env.bootstrap, env.topic, env.partitions, writers=2, rate=rate)
        res = run_chaos(
            w, [nem], cycles=cycles, seed=seed, out_dir=out, hold=(0.5, 2.0), quiet=(1.0, 3.0),
            healthy=env.healthy, describe=env.describe, recover_timeout_s=90.0,
        )  # fmt: skip
        data_dirs = {i: env.brokers.broker(i).data_dir for i in env.brokers.ids}
        div = replica_divergence(data_dirs, env.topic, env.partitions)
        ops, _ = h.snapshot()
        rec = recovery_times(ops, [t - h.t0 for t in nem.power_on], env.partitions, len(w.writers))
        row = figures(res.report.summary(), res.per_nemesis, nem, rec, len(div))
    row = {
        "scenario": name,
        "flush.messages": sc.overrides.get("log.flush.interval.messages", "default"),
    } | row
    sr = ScenarioResult(name, res, div, row)
    sr.problems = verdict(sc, sr)
    return sr


def verdict(sc: Scenario, sr: ScenarioResult) -> list[str]:
    """What the scenario got wrong (empty: it showed what it must)."""
    res, row = sr.chaos, sr.row
    problems = []
    if sr.divergent_replicas:
        problems.append(f"replicas diverge: {sr.divergent_replicas[:5]}")
    if row["corrupt"]:
        problems.append(f"corrupt records served: {res.report.anomalies['corrupt'][:5]}")
    if res.unrecovered:
        problems.append(f"not recovered: {res.unrecovered}")
    if sc.expect_loss:
        if not row["lost"]:
            problems.append("no acknowledged record lost: the power loss dropped nothing the checker saw")
    elif not res.valid:
        problems.append(res.explain())
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="powerloss", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--mode", choices=("long", "short"), default="long")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--cycles", type=int, default=None, help="per scenario (default: by mode)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("chaos-report/powerloss"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kazoo", "chaos.rdkafka"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    rows, failed = [], []
    for name in args.scenarios.split(","):
        cycles = args.cycles or (SCENARIOS[name].long_cycles if args.mode == "long" else 3)
        tmp = Path(tempfile.mkdtemp(prefix=f"kafkad-powerloss-{name}-"))
        sr = run_scenario(name, tmp / "env", args.out / name, cycles=cycles, seed=seed)
        rows.append(sr.row | {"seed": seed, "problems": sr.problems})
        print(json.dumps(sr.row), flush=True)
        if sr.problems:
            failed.append(name)
            print(f"{name}: " + "\n".join(sr.problems), file=sys.stderr)
            print(f"logs of the brokers and ZooKeeper kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "powerloss-figures.json").write_text(json.dumps(rows, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
