"""Consumer-group costs on a real kafkad: offset-commit CPU, commit load vs produce/fetch, rebalance time.

`python -m tests.bench.bench_groups [--quick]` prints three tables and writes bench/results/groups.json.

1. commit CPU: 100 raw asyncio connections (a separate process, so the bench's own CPU is not the
   broker's) each send a "simple" OffsetCommit v7 (generation -1, empty member id, own group) 10 times a
   second = 1,000 commits/s. Broker CPU = psutil cpu_times delta / wall, in % of one core, measured over
   the same window idle and then under load, 3 runs.
2. produce/fetch: a fixed count of 100-byte records through confluent-kafka, without and with the commit
   load running; the ratio is taken pair by pair (the order alternates inside the pairs to cancel drift).
3. rebalance: 5 confluent-kafka consumers (spawned processes) subscribe to one 10-partition topic at once;
   on_assign/on_revoke callbacks send monotonic timestamps (CLOCK_MONOTONIC is system-wide) to the
   parent, which finds the first instant every member holds a non-empty, disjoint share covering all
   partitions. Server-side share: JoinGroup/SyncGroup totaltimems histogram sums from /metrics. Note a
   JoinGroup's time includes the barrier wait for the other members (as in Kafka's purgatory).

The machine is shared (2 cores), so every figure is min/median/max over runs, never a single sample.
Helpers (`bench_broker`, `produce_records`, `spread`, ...) are reused by bench_bridge_impact; topic
creation and producing go through tests/integration/clients.py.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import multiprocessing as mp
import queue
import statistics
import struct
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any

import psutil

from kafkad.protocol import ApiKey, RequestHeader, decode_response, encode_request
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.clients import Rec, create_topics, produce_confluent

log = logging.getLogger(__name__)

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
CTX = mp.get_context("spawn")  # no fork of a process holding librdkafka threads
COMMIT_TOPIC = "bench-commits"
COMMIT_PARTITIONS = 10
HEARTBEAT_MS = 3000


# --- shared helpers -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Spread:
    min: float
    median: float
    max: float
    n: int


def spread(values: list[float]) -> Spread:
    return Spread(min(values), statistics.median(values), max(values), len(values))


def fmt(s: Spread, unit: str = "", digits: int = 2) -> str:
    return f"{s.min:.{digits}f} / {s.median:.{digits}f} / {s.max:.{digits}f}{unit}"


@contextmanager
def bench_broker(overrides: Mapping[str, str] | None = None) -> Iterator[tuple[BrokerProcess, int]]:
    """A fresh kafkad in a temp dir with a metrics listener; yields (broker, metrics_port)."""
    mport = free_port()
    with tempfile.TemporaryDirectory(prefix="kafkad-bench-") as d:
        props = {"metrics.listeners": f"http://127.0.0.1:{mport}", **(overrides or {})}
        with BrokerProcess(Path(d), props) as broker:
            yield broker, mport


def broker_cpu_s(broker: BrokerProcess) -> float:
    """User + system CPU seconds of the broker process and its live children."""
    assert broker.proc is not None
    p = psutil.Process(broker.proc.pid)
    total = 0.0
    for q in [p, *p.children(recursive=True)]:
        try:
            t = q.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def produce_records(bootstrap: str, topic: str, n: int, size: int) -> float:
    """Produce n records of `size` bytes (acks=all) and flush; returns records/s."""
    config: dict[str, str | int | bool] = {
        "linger.ms": 5,
        "batch.size": 262_144,
        "acks": "all",
        "queue.buffering.max.messages": 500_000,
    }
    rec = Rec(-1, None, b"v" * size, (), None)  # one record object n times: no per-record building cost
    t0 = time.perf_counter()
    produce_confluent(bootstrap, topic, itertools.repeat(rec, n), config)
    return n / (time.perf_counter() - t0)


def fetch_records(bootstrap: str, topic: str, n: int) -> float:
    """Consume n records from partition 0 from the beginning; returns records/s."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fetch-{topic}", "enable.auto.commit": False})
    got = 0
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 120
    while got < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fetch {topic}: {got} of {n} records in 120 s")
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    rate = n / (time.perf_counter() - t0)
    c.close()
    return rate


def scrape(mport: int) -> dict[str, float]:
    """Every sample line of /metrics as {'name{labels}': value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, val = line.rpartition(" ")
            out[key] = float(val)
    return out


# --- 1. commit load -------------------------------------------------------------------------------
def simple_commit_body(idx: int, offset: int) -> dict[str, Any]:
    """OffsetCommit v7 body of connection `idx`'s "simple" (assign()-style, generation -1) commit."""
    partition = {
        "partition_index": idx % COMMIT_PARTITIONS,
        "committed_offset": offset,
        "committed_metadata": "",
    }
    return {
        "group_id": f"bench-simple-{idx}",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [{"name": COMMIT_TOPIC, "partitions": [partition]}],
    }


async def _committer(port: int, idx: int, rate: float, stop: MpEvent, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    corr, offset, period = 0, 0, 1.0 / rate
    loop = asyncio.get_running_loop()
    await asyncio.sleep(period * idx / 100)  # spread the 100 connections over the period
    nxt = loop.time()
    while not stop.is_set():
        corr += 1
        offset += 1
        body = simple_commit_body(idx, offset)
        writer.write(encode_request(RequestHeader(ApiKey.OFFSET_COMMIT, 7, corr, "bench-commit"), body))
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        _, resp = decode_response(ApiKey.OFFSET_COMMIT, 7, await reader.readexactly(size))
        err = resp["topics"][0]["partitions"][0]["error_code"]
        counts[1 if err else 0] += 1
        nxt += period
        await asyncio.sleep(max(0.0, nxt - loop.time()))
    writer.close()


def _commit_load_main(port: int, conns: int, rate: float, ready: MpEvent, stop: MpEvent, q: Any) -> None:
    async def run() -> None:
        counts = [0, 0]
        go = asyncio.Event()
        t0 = 0.0

        async def one(i: int) -> None:
            await go.wait()
            await _committer(port, i, rate, stop, counts)

        tasks = [asyncio.create_task(one(i)) for i in range(conns)]
        go.set()
        await asyncio.sleep(0.2)
        ready.set()
        t0 = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        await asyncio.gather(*tasks)
        q.put((counts[0], counts[1], time.monotonic() - t0))

    asyncio.run(run())


class CommitLoad:
    """`conns` connections x `rate` commits/s each, in a spawned process while the context is open."""

    def __init__(self, port: int, conns: int = 100, rate: float = 10.0) -> None:
        self.ready, self.stop_ev, self.q = CTX.Event(), CTX.Event(), CTX.Queue()
        self.proc = CTX.Process(
            target=_commit_load_main, args=(port, conns, rate, self.ready, self.stop_ev, self.q), daemon=True
        )
        self.ok = self.errors = 0
        self.seconds = self.client_cpu_pct = 0.0

    def __enter__(self) -> CommitLoad:
        self.proc.start()
        if not self.ready.wait(30):
            raise RuntimeError("commit load did not start")
        time.sleep(1.0)  # past the connection burst: measure the steady state
        assert self.proc.pid is not None
        self._ps = psutil.Process(self.proc.pid)
        self._cpu0, self._t0 = sum(self._ps.cpu_times()[:2]), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client_cpu_pct = (
            100 * (sum(self._ps.cpu_times()[:2]) - self._cpu0) / (time.monotonic() - self._t0)
        )
        self.stop_ev.set()
        self.ok, self.errors, self.seconds = self.q.get(timeout=30)
        self.proc.join(10)

    @property
    def rate(self) -> float:
        return self.ok / self.seconds if self.seconds else 0.0


def bench_commit_cpu(runs: int, seconds: float) -> dict[str, Any]:
    idle: list[float] = []
    loaded: list[float] = []
    achieved: list[float] = []
    client: list[float] = []
    errors = 0
    for r in range(runs):
        with bench_broker() as (broker, _):
            create_topics(broker.bootstrap, {COMMIT_TOPIC: COMMIT_PARTITIONS})
            time.sleep(1.0)
            c0, t0 = broker_cpu_s(broker), time.monotonic()
            time.sleep(seconds)
            idle.append(100 * (broker_cpu_s(broker) - c0) / (time.monotonic() - t0))
            with CommitLoad(broker.port) as load:
                c0, t0 = broker_cpu_s(broker), time.monotonic()
                time.sleep(seconds)
                loaded.append(100 * (broker_cpu_s(broker) - c0) / (time.monotonic() - t0))
            achieved.append(load.rate)
            client.append(load.client_cpu_pct)
            errors += load.errors
        log.info("run %d: idle %.1f%% loaded %.1f%% at %.0f commits/s", r, idle[-1], loaded[-1], achieved[-1])
    delta = [b - a for a, b in zip(idle, loaded, strict=True)]
    return {
        "seconds": seconds,
        "idle_cpu_pct": asdict(spread(idle)),
        "loaded_cpu_pct": asdict(spread(loaded)),
        "commit_cost_cpu_pct": asdict(spread(delta)),
        "commits_per_s": asdict(spread(achieved)),
        "commit_errors": errors,
        "load_generator_cpu_pct": asdict(spread(client)),
    }


# --- 2. produce/fetch with and without commits ----------------------------------------------------
LEGS = ("idle", "load", "control")


def bench_throughput(pairs: int, n: int) -> dict[str, Any]:
    """Per round: produce+fetch idle, with commits to this broker, and with the same commit load aimed at
    a second broker (control: same client CPU on the shared cores, nothing for this broker to do)."""
    rows: dict[str, list[float]] = {f"{op}_{leg}": [] for op in ("p", "f") for leg in LEGS}
    with bench_broker() as (broker, _), bench_broker() as (other, _):
        for b in (broker, other):
            create_topics(b.bootstrap, {COMMIT_TOPIC: COMMIT_PARTITIONS, "pf-warmup": 1})
        # Warm-up (imports, first segment, connection setup) so the first round is not penalised.
        produce_records(broker.bootstrap, "pf-warmup", n // 4, 100)
        fetch_records(broker.bootstrap, "pf-warmup", n // 4)
        for k in range(pairs):
            for leg in LEGS[k % 3 :] + LEGS[: k % 3]:  # rotate the order to cancel drift
                topic = f"pf-{k}-{leg}"
                create_topics(broker.bootstrap, {topic: 1})
                target = {"idle": None, "load": broker.port, "control": other.port}[leg]
                load = CommitLoad(target) if target is not None else None
                if load is not None:
                    load.__enter__()
                try:
                    rows[f"p_{leg}"].append(produce_records(broker.bootstrap, topic, n, 100))
                    rows[f"f_{leg}"].append(fetch_records(broker.bootstrap, topic, n))
                finally:
                    if load is not None:
                        load.__exit__(None, None, None)
    out: dict[str, Any] = {"records": n, "record_bytes": 100}
    for op, name in (("p", "produce"), ("f", "fetch")):
        for leg in LEGS:
            out[f"{name}_{leg}_rps"] = asdict(spread(rows[f"{op}_{leg}"]))
        for base in ("idle", "control"):
            r = [b / a for a, b in zip(rows[f"{op}_{base}"], rows[f"{op}_load"], strict=True)]
            out[f"{name}_ratio_load_{base}"] = asdict(spread(r))
    return out


# --- 3. rebalance --------------------------------------------------------------------------------
def _member_main(
    bootstrap: str, topic: str, group: str, idx: int, go: MpEvent, stop: MpEvent, q: Any
) -> None:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "heartbeat.interval.ms": HEARTBEAT_MS,  # librdkafka's default, explicit: it bounds the rejoin
        }
    )

    def on_assign(_c: object, parts: list[Any]) -> None:
        if not stop.is_set():
            q.put(("assign", idx, time.monotonic(), [tp.partition for tp in parts]))

    def on_revoke(_c: object, _parts: list[Any]) -> None:
        if not stop.is_set():
            q.put(("revoke", idx, time.monotonic(), []))

    q.put(("ready", idx, time.monotonic(), []))
    go.wait(60)
    q.put(("subscribe", idx, time.monotonic(), []))
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop.is_set():
        c.poll(0.05)
    c.close()


def _complete_at(events: list[tuple[str, int, float, list[int]]], members: int, parts: int) -> float | None:
    held: dict[int, list[int]] = {}
    for kind, idx, t, ps in sorted(events, key=lambda e: e[2]):
        if kind in ("assign", "revoke"):
            held[idx] = ps
            shares = [held.get(i, []) for i in range(members)]
            flat = sorted(p for s in shares for p in s)
            if all(shares) and flat == list(range(parts)):
                return t
    return None


def _metric_delta(before: dict[str, float], after: dict[str, float], api: str) -> tuple[float, float]:
    """(count, total ms) of one API's totaltimems histogram between two scrapes."""
    k = f'kafka_network_requestmetrics_totaltimems_{{}}{{{{request="{api}"}}}}'
    cnt = after.get(k.format("count"), 0.0) - before.get(k.format("count"), 0.0)
    tot = after.get(k.format("sum"), 0.0) - before.get(k.format("sum"), 0.0)
    return cnt, tot


def bench_rebalance(delay_ms: int, runs: int, members: int = 5, parts: int = 10) -> dict[str, Any]:
    from_last: list[float] = []
    from_first: list[float] = []
    assigns: list[float] = []
    server: dict[str, list[float]] = {
        "JoinGroup_ms": [],
        "SyncGroup_ms": [],
        "JoinGroup_n": [],
        "SyncGroup_n": [],
    }
    with bench_broker({"group.initial.rebalance.delay.ms": str(delay_ms)}) as (broker, mport):
        for r in range(runs):
            topic, group = f"rb-{r}", f"rb-group-{r}"
            create_topics(broker.bootstrap, {topic: parts})
            go, stop, q = CTX.Event(), CTX.Event(), CTX.Queue()
            procs = [
                CTX.Process(
                    target=_member_main, args=(broker.bootstrap, topic, group, i, go, stop, q), daemon=True
                )
                for i in range(members)
            ]
            for p in procs:
                p.start()
            events: list[tuple[str, int, float, list[int]]] = []
            while sum(1 for e in events if e[0] == "ready") < members:
                events.append(q.get(timeout=60))
            before = scrape(mport)
            go.set()
            deadline = time.monotonic() + 90
            done = None
            while done is None and time.monotonic() < deadline:
                try:
                    events.append(q.get(timeout=1))
                except queue.Empty:
                    continue
                done = _complete_at(events, members, parts)
            time.sleep(0.2)  # let the last SyncGroup's response be recorded
            after = scrape(mport)
            stop.set()
            for p in procs:
                p.join(30)
            if done is None:
                raise RuntimeError(f"rebalance did not complete in 90 s: {events}")
            subs = [e[2] for e in events if e[0] == "subscribe"]
            from_last.append(1000 * (done - max(subs)))
            from_first.append(1000 * (done - min(subs)))
            assigns.append(sum(1 for e in events if e[0] == "assign"))
            for api in ("JoinGroup", "SyncGroup"):
                n, ms = _metric_delta(before, after, api)
                server[f"{api}_n"].append(n)
                server[f"{api}_ms"].append(ms / n if n else 0.0)
            log.info("delay %d run %d: %.0f ms after last subscribe", delay_ms, r, from_last[-1])
    return {
        "initial_rebalance_delay_ms": delay_ms,
        "members": members,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "partitions": parts,
        "ms_from_last_subscribe": asdict(spread(from_last)),
        "ms_from_first_subscribe": asdict(spread(from_first)),
        "on_assign_calls": asdict(spread(assigns)),
        **{f"server_{k}": asdict(spread(v)) for k, v in server.items()},
    }


# --- CLI -----------------------------------------------------------------------------------------
def _s(d: dict[str, Any], digits: int = 1, unit: str = "") -> str:
    return fmt(Spread(**d), unit, digits)


def print_tables(res: dict[str, Any]) -> None:
    c = res["commit_cpu"]
    print(f"\n1. Broker CPU, % of one core, {c['seconds']:.0f} s windows (min / median / max over runs)")
    print(f"   idle broker              {_s(c['idle_cpu_pct'])}")
    print(f"   1,000 commits/s load     {_s(c['loaded_cpu_pct'])}")
    print(f"   cost of the commits      {_s(c['commit_cost_cpu_pct'])}   (loaded - idle, run by run)")
    print(f"   achieved commits/s       {_s(c['commits_per_s'], 0)}   errors: {c['commit_errors']}")
    print(f"   load generator's own CPU {_s(c['load_generator_cpu_pct'])}   (same 2 cores as the broker)")
    t = res["throughput"]
    print(
        f"\n2. Throughput, {t['records']:,} x {t['record_bytes']} B records, records/s (min / median / max)"
    )
    print("   legs: idle | commits to this broker | control: same commit load aimed at a 2nd broker")
    for name in ("produce", "fetch"):
        print(f"   {name:<7} idle    {_s(t[f'{name}_idle_rps'], 0)}")
        print(f"   {name:<7} load    {_s(t[f'{name}_load_rps'], 0)}")
        print(f"   {name:<7} control {_s(t[f'{name}_control_rps'], 0)}")
        print(
            f"   {name:<7} ratio load/idle {_s(t[f'{name}_ratio_load_idle'], 3)}"
            f" | load/control {_s(t[f'{name}_ratio_load_control'], 3)}  (round by round)"
        )
    print("\n3. Rebalance of 5 consumers on 10 partitions, ms (min / median / max)")
    print(
        f"   (clients' heartbeat.interval.ms {HEARTBEAT_MS}: a member already in a generation learns of a"
        " rebalance on its next heartbeat; as in Kafka, members joining during the initial delay extend it"
        " once more by the delay)"
    )
    for rb in res["rebalance"]:
        print(
            f"   delay {rb['initial_rebalance_delay_ms']:>5} ms: from last subscribe {_s(rb['ms_from_last_subscribe'], 0)}"
            f"; from first {_s(rb['ms_from_first_subscribe'], 0)}; on_assign calls {_s(rb['on_assign_calls'], 0)}"
        )
        print(
            f"      server JoinGroup mean {_s(rb['server_JoinGroup_ms'], 1)} ms"
            f" (n {_s(rb['server_JoinGroup_n'], 0)}); SyncGroup mean {_s(rb['server_SyncGroup_ms'], 1)} ms"
            f" (n {_s(rb['server_SyncGroup_n'], 0)})"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="shorter windows, fewer runs")
    ap.add_argument("--out", type=Path, default=RESULTS / "groups.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    q = args.quick
    res: dict[str, Any] = {"quick": q, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    res["commit_cpu"] = bench_commit_cpu(runs=3, seconds=10.0 if q else 20.0)
    res["throughput"] = bench_throughput(pairs=3 if q else 5, n=400_000 if q else 1_000_000)
    res["rebalance"] = [bench_rebalance(d, runs=2 if q else 3) for d in (0, 3000)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print_tables(res)
    return res


if __name__ == "__main__":
    main()
