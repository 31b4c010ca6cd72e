"""Short chaos mode of the transactional workload (issue 20 item 5): real confluent-kafka processors
(consume read_committed -> produce -> send_offsets_to_transaction -> commit, one in ten aborted on purpose),
a read_committed reader and an LSO monitor, under kill -9 of the transaction coordinator's broker, kill -9 of
an output partition's leader, and a processor dying mid-transaction (left to the coordinator's timeout);
then the input is drained and the output read. txn_checker must find no aborted record read, no committed
transaction seen partly, no duplicate (exactly-once across the restarts), no LSO held past the transaction
timeout, no input left unprocessed. Seed printed; CHAOS_SEED replays. Needs txn-log and txn-coord (issue 20)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from tests.chaos.envs import ChaosEnv, cluster_env, standalone_env
from tests.chaos.txn_history import TxnHistory
from tests.chaos.txn_main import CLUSTER_OVERRIDES, OVERRIDES, SINK, SOURCE, nemeses_for
from tests.chaos.txn_runner import TxnChaosResult, run_txn_chaos
from tests.chaos.txn_workload import TxnWorkload
from tests.chaos.workload import create_topic

pytestmark = [pytest.mark.system]


def seed() -> int:
    return int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 32))


def _run(env: ChaosEnv, tmp_path: Path, names: list[str], rf: int) -> TxnChaosResult:
    for topic in (SOURCE, SINK):
        create_topic(env.bootstrap, topic, env.partitions, rf, {"min.insync.replicas": "2"} if rf > 1 else {})
    w = TxnWorkload(TxnHistory(), env.bootstrap, SOURCE, SINK, env.partitions, processors=2, rate=60)
    res = run_txn_chaos(
        w, nemeses_for(env, w, names), cycles=len(names), seed=seed(), out_dir=tmp_path / "report",
        hold=(1.0, 2.0), quiet=(1.0, 2.0), healthy=env.healthy,
    )  # fmt: skip
    print("txn chaos table:", json.dumps(res.table(), indent=1))
    return res


@pytest.mark.timeout(600)
def test_txn_chaos_short_standalone(tmp_path: Path) -> None:
    with standalone_env(tmp_path / "env", overrides=OVERRIDES) as env:
        res = _run(env, tmp_path, ["kill9-txn-coordinator", "kill9-leader", "kill-processor"], 1)
        log = env.brokers.broker(0).log_text(since_start=False)[-4000:]
    assert res.valid, res.explain() + "\nbroker log:\n" + log
    assert res.report.counts["committed"] > 20 and res.report.counts["aborted"] > 0
    assert res.report.counts["died"] == 1 and res.report.lso_waits
    assert {f.name for f in res.history.faults} == {"kill9-txn-coordinator", "kill9-leader", "kill-processor"}


@pytest.mark.timeout(900)
def test_txn_chaos_short_cluster(tmp_path: Path) -> None:
    with cluster_env(tmp_path / "env", overrides=CLUSTER_OVERRIDES) as env:
        res = _run(env, tmp_path, ["kill9-txn-coordinator", "kill9-leader", "kill-processor"], 3)
        detail = env.describe()
    assert res.valid, res.explain() + "\n" + detail
    assert res.report.counts["committed"] > 20 and res.report.counts["died"] == 1
