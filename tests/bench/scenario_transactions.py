"""Transactions scenario (issue 20's figures), each beside a baseline measured in the same run:

1. Throughput: a confluent-kafka transactional producer committing every 100 ms against the idempotent
   producer without transactions (acks=all, linger.ms 5, 100-byte records, one 3-partition topic each),
   alternating which goes first run by run; goal ratio >= 0.7.
2. read_committed catch-up: a topic filled by transactions (commit every 100 ms, one in ten aborted), read
   from offset 0 to its end by a confluent consumer with isolation.level=read_committed and with
   read_uncommitted; the broker's CPU seconds (user + system, /proc) per GiB read; goal ratio <= 1.1.
3. Coordinator failover (ZooKeeper + 3 kafkad, __transaction_state RF 3): a transactional producer
   commits a one-record transaction every 100 ms (reconnect.backoff.max.ms 100, so the client's backoff is
   not what is measured); kill -9 of the broker leading its __transaction_state partition; the time from the
   kill to the next acknowledged commit, beside the killed broker's ZooKeeper session expiry in the same run
   (the floor); goal <= the ZooKeeper session timeout + 1 s. The killed broker is restarted and the ISR full again before the next run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from kafkad.coordinator.group.records import partition_for
from tests.bench.cluster_env import SESSION_TIMEOUT_MS, ZkGoneWatch, cluster_env, create_topic
from tests.bench.context import Context, GiB
from tests.bench.servers import start_broker
from tests.bench.stats import Row, figure, ratio
from tests.bench.stats import Target as Goal
from tests.bench.workers import Job
from tests.integration.clients import create_topics

log = logging.getLogger(__name__)
SECTION = "transactions"
CONFIG = {"acks": "all", "linger.ms": 5}
TXN_BROKER = {"transaction.state.log.num.partitions": "5", "num.partitions": "3"}
STATE_PARTITIONS = 5


def transactions(ctx: Context) -> None:
    broker = start_broker(ctx.work / "transactions", TXN_BROKER)
    try:
        create_topics(broker.bootstrap, {"txn": 3, "idem": 3, "rc": 1})
        _throughput(ctx, broker.bootstrap)
        assert broker.proc is not None
        _catch_up(ctx, broker.bootstrap, broker.proc.pid)
    finally:
        broker.stop()
    _failover(ctx)


def _throughput(ctx: Context, bootstrap: str) -> None:
    rates: dict[str, list[float]] = {"txn": [], "idem": []}
    for i in range(ctx.settings.runs):
        for kind in ("txn", "idem") if i % 2 == 0 else ("idem", "txn"):
            args: dict[str, Any] = {"bootstrap": bootstrap, "topic": kind, "size": 100,
                                    "duration_s": max(2.0, ctx.settings.produce_s)}  # fmt: skip
            if kind == "txn":
                job = Job("txn_produce_throughput", {**args, "commit_interval_s": 0.1, "config": CONFIG})
            else:
                job = Job("produce_throughput", {**args, "config": {**CONFIG, "enable.idempotence": True}})
            r = ctx.pool.run([job]).results[0]
            rates[kind].append(r["records"] / r["s"])
        log.info("transactions run %d: %s", i, {k: f"{v[-1]:.0f} rec/s" for k, v in rates.items()})
    k = figure("transactional, commit every 100 ms", "rec/s", rates["txn"])
    b = figure("idempotent, no transactions", "rec/s", rates["idem"])
    ctx.rows.append(Row(SECTION, "transactional producer (commit every 100 ms) rec/s", k, b,
                        "idempotent producer", ratio("", k, b), Goal(">=", 0.7), True))  # fmt: skip


def _fill(ctx: Context, bootstrap: str, total_bytes: int) -> None:
    """`total_bytes` of 1 KiB records in transactions of 100 ms, one in ten aborted (data a read_committed
    reader skips, with its .txnindex entry)."""
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-fill", **CONFIG,
                     "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    p.init_transactions(60)
    value = b"r" * 1024
    written = 0
    n_txn = 0
    while written < total_bytes:
        p.begin_transaction()
        close_at = time.monotonic() + 0.1
        while time.monotonic() < close_at and written < total_bytes:
            try:
                p.produce("rc", value, partition=0)
                written += len(value)
            except BufferError:
                p.poll(0.001)
        n_txn += 1
        if n_txn % 10 == 0:
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)


def _cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def _catch_up(ctx: Context, bootstrap: str, pid: int) -> None:
    total = min(ctx.settings.fetch_bytes, 256 << 20)
    _fill(ctx, bootstrap, total)
    per_gib: dict[str, list[float]] = {"read_committed": [], "read_uncommitted": []}
    for i in range(ctx.settings.runs):
        order = (
            ("read_committed", "read_uncommitted") if i % 2 == 0 else ("read_uncommitted", "read_committed")
        )
        for level in order:
            job = Job("consume_to_end", {"bootstrap": bootstrap, "topic": "rc", "partitions": 1,
                                         "config": {"isolation.level": level, "fetch.max.bytes": 52428800}})  # fmt: skip
            before = _cpu_s(pid)
            r = ctx.pool.run([job]).results[0]
            used = _cpu_s(pid) - before
            per_gib[level].append(used / max(r["bytes"], 1) * GiB)
        log.info("catch-up run %d: %s", i, {k: f"{v[-1]:.2f} CPU s/GiB" for k, v in per_gib.items()})
    k = figure("read_committed catch-up", "CPU s/GiB", per_gib["read_committed"])
    b = figure("read_uncommitted catch-up", "CPU s/GiB", per_gib["read_uncommitted"])
    ctx.rows.append(Row(SECTION, "read_committed catch-up broker CPU s/GiB", k, b, "read_uncommitted",
                        ratio("", k, b), Goal("<=", 1.1), True))  # fmt: skip


class _Committer(threading.Thread):
    """A transactional producer committing a one-record transaction every 100 ms; `commits` holds the
    monotonic time of every acknowledged commit."""

    def __init__(self, bootstrap: str, txn_id: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.txn_id = bootstrap, txn_id
        self.commits: list[float] = []
        self.stop_event = threading.Event()
        self.errors: list[str] = []

    def _producer(self) -> Any:
        import confluent_kafka as ck

        # reconnect.backoff.max.ms 100: librdkafka asks FindCoordinator again only after a failed reconnect to
        # the old coordinator, and its default backoff (growing to 10 s) would measure the client: seen
        # with debug=eos, the new coordinator was ready 4.8 s after the kill, the client asked at 11.4 s
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                         "metadata.recovery.strategy": "none", "reconnect.backoff.max.ms": 100,
                         **CONFIG})  # fmt: skip
        while not self.stop_event.is_set():
            try:
                p.init_transactions(10)
                return p
            except ck.KafkaException as e:
                self.errors.append(e.args[0].name())
        return p

    def run(self) -> None:
        import confluent_kafka as ck

        p = self._producer()
        while not self.stop_event.wait(0.1):
            try:
                p.begin_transaction()
                p.produce("fo", b"x")
                p.commit_transaction(30)
                self.commits.append(time.monotonic())
            except ck.KafkaException as e:
                err = e.args[0]
                self.errors.append(err.name())
                try:
                    if err.txn_requires_abort():
                        p.abort_transaction(30)
                    elif err.fatal():
                        p = self._producer()
                except ck.KafkaException as e2:
                    self.errors.append(e2.args[0].name())
                    p = self._producer()


def _failover(ctx: Context) -> None:
    overrides = {**TXN_BROKER, "transaction.state.log.replication.factor": "3",
                 "transaction.state.log.min.isr": "2", "min.insync.replicas": "2"}  # fmt: skip
    txn_id = "bench-failover"
    state_partition = partition_for(txn_id, STATE_PARTITIONS)
    times: list[float] = []
    expiries: list[float] = []
    both: list[bool] = []  # the killed broker also led the producer's partition (two failovers at once)
    with cluster_env(ctx.work / "txn-failover", overrides) as c:
        create_topic(c, "fo", [[1, 2, 3]], {"min.insync.replicas": "2"})
        committer = _Committer(c.bootstrap, txn_id)
        committer.start()
        try:
            c.wait_until(lambda: len(committer.commits) >= 10, 120, "transactions committing")
            for i in range(ctx.settings.runs):
                state = c.partition_state("__transaction_state", state_partition)
                assert state is not None and state.leader > 0, state
                victim = state.leader
                data = c.partition_state("fo", 0)
                both.append(data is not None and data.leader == victim)
                gone = ZkGoneWatch(c, victim)
                t0 = time.monotonic()
                c.kill9(victim)
                c.wait_until(_after(committer.commits, t0), 120, "a commit after the kill")
                times.append(min(t for t in committer.commits if t > t0) - t0)
                expiries.append(gone.wait(60) - t0)
                log.info("txn failover run %d: broker %d killed (data leader too: %s), session expired after "
                         "%.2f s, next commit after %.2f s", i, victim, both[-1], expiries[-1], times[-1])  # fmt: skip
                c.restart(victim)
                c.wait_until(lambda: _full_isr(c, state_partition), 120, "__transaction_state ISR full again")
        finally:
            committer.stop_event.set()
            committer.join(60)
    f = figure("kill -9 of the coordinator's broker to the next commit", "s", times)
    b = figure("the killed broker's ZooKeeper session expiry", "s", expiries)
    ctx.rows.append(Row(SECTION, "transaction coordinator failover to the next commit (s)", f, b,
                        "ZooKeeper session expiry", ratio("", f, b), Goal("<=", SESSION_TIMEOUT_MS / 1000 + 1),
                        extra={"also_led_the_data_partition": both}))  # fmt: skip


def _after(commits: list[float], t0: float) -> Callable[[], bool]:
    return lambda: any(t > t0 for t in commits)


def _full_isr(c: Any, partition: int) -> bool:
    s = c.partition_state("__transaction_state", partition)
    return s is not None and len(s.isr) == 3
