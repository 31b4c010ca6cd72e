"""Broker CPU per OffsetCommit: the commit-CPU leg of bench_groups alone, optionally under py-spy.

How it works: for each run a fresh kafkad is started, measured idle for `seconds`, then under the
bench_groups commit load (100 raw connections x 10 "simple" OffsetCommit v7/s = 1,000 commits/s, from a
separate process) for `seconds`. Figures are % of one core (psutil CPU-time delta / wall), min / median /
max over runs, plus the cost per commit in ms of CPU. With --profile, the last run's loaded window is
also sampled by `py-spy record --format raw` and folded to the top functions (tests.bench.profile.fold).

--inproc skips sockets: a real Broker (tmp dir, real storage) and Dispatcher in this process, and the
same commit frames fed to `Dispatcher.dispatch` in a loop; prints the CPU time per commit (the Python
side of a commit plus its segment write, without the socket recv/send/epoll), optionally under cProfile.

Run: .venv/bin/python -m tests.bench.bench_hotpath_commit [--runs 3] [--seconds 10] [--profile out.txt]
     .venv/bin/python -m tests.bench.bench_hotpath_commit --inproc [--cprofile]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from tests.bench.bench_groups import (
    COMMIT_PARTITIONS,
    COMMIT_TOPIC,
    CommitLoad,
    bench_broker,
    broker_cpu_s,
    fmt,
    simple_commit_body,
    spread,
)
from tests.bench.profile import fold
from tests.integration.clients import create_topics

log = logging.getLogger("bench.commit")
NATIVE = False  # --native: C frames (uvloop, CPython) in the py-spy stacks too


def _user_sys(broker: Any) -> tuple[float, float]:
    t = psutil.Process(broker.proc.pid).cpu_times()
    return t.user, t.system


def run_once(seconds: float, profile: Path | None) -> tuple[float, float, float]:
    """(idle %, loaded %, achieved commits/s) of one fresh broker."""
    with bench_broker() as (broker, _):
        create_topics(broker.bootstrap, {COMMIT_TOPIC: COMMIT_PARTITIONS})
        time.sleep(1.0)
        c0, t0 = broker_cpu_s(broker), time.monotonic()
        time.sleep(seconds)
        idle = 100 * (broker_cpu_s(broker) - c0) / (time.monotonic() - t0)
        with CommitLoad(broker.port) as load:
            spy = None
            if profile is not None:
                exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
                assert broker.proc is not None
                spy = subprocess.Popen(
                    [
                        exe,
                        "record",
                        *(["--native"] if NATIVE else []),
                        "--pid",
                        str(broker.proc.pid),
                        "--format",
                        "raw",
                        "-o",
                        str(profile) + ".raw",
                        "-d",
                        str(int(seconds)),
                        "-r",
                        "200",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            c0, t0, us0 = broker_cpu_s(broker), time.monotonic(), _user_sys(broker)
            time.sleep(seconds)
            loaded = 100 * (broker_cpu_s(broker) - c0) / (time.monotonic() - t0)
            us1, wall = _user_sys(broker), time.monotonic() - t0
            log.info(
                "loaded window: user %.1f%% system %.1f%% of a core",
                100 * (us1[0] - us0[0]) / wall,
                100 * (us1[1] - us0[1]) / wall,
            )
            if spy is not None:
                spy.wait(60)
        if profile is not None:
            profile.write_text(fold(Path(str(profile) + ".raw").read_text(), top=45))
        return idle, loaded, load.rate


def inproc(runs: int, number: int, cprofile: bool) -> None:
    import asyncio
    import cProfile
    import pstats
    import statistics
    import tempfile

    from kafkad.api import load_handlers
    from kafkad.api.broker import Broker
    from kafkad.clock import SystemClock
    from kafkad.cluster.producer_ids import ProducerIdManager
    from kafkad.config.broker_config import load_config
    from kafkad.coordinator.group.service import coordinator_for
    from kafkad.network.dispatcher import Dispatcher
    from kafkad.protocol import ApiKey, RequestHeader, encode_request
    from kafkad.replication.manager import ReplicaManager
    from kafkad.service.metrics import BrokerMetrics
    from kafkad.storage.log_manager import LogManager

    def frame(idx: int, corr: int, offset: int) -> bytearray:
        body = simple_commit_body(idx, offset)
        req = encode_request(RequestHeader(ApiKey.OFFSET_COMMIT, 7, corr, "bench-commit"), body)
        return bytearray(req[4:])

    async def go(d: str) -> None:
        cfg = load_config(None, [f"log.dirs={d}/data", "listeners=PLAINTEXT://127.0.0.1:9092"])
        clock = SystemClock()
        lm = LogManager(cfg.log_manager_config(), cfg.log_config(), clock)
        lm.load()
        pids = ProducerIdManager(cfg.storage.log_dirs, 10)
        pids.load()
        broker = Broker(cfg, clock, lm, ReplicaManager(lm, 0), pids, 0, "c")
        broker.replicas.create_topic(COMMIT_TOPIC, COMMIT_PARTITIONS)
        coordinator_for(broker)
        metrics = BrokerMetrics(process=False)
        disp = Dispatcher(broker, load_handlers(), on_request=metrics.record_api)
        frames = [frame(i % 100, i, i) for i in range(number)]
        per: list[float] = []
        prof = cProfile.Profile() if cprofile else None
        for _ in range(runs):
            copies = [bytearray(f) for f in frames]
            if prof is not None:
                prof.enable()
            t0 = time.process_time()
            pending = []  # handlers that did not finish eagerly (all of them before eager dispatch)
            for f in copies:
                out = disp.dispatch(f, "p")
                if isinstance(out, asyncio.Task):
                    pending.append(out)
                else:
                    assert isinstance(out, list), out
            for result in await asyncio.gather(*pending):
                assert isinstance(result, list), result
            per.append((time.process_time() - t0) / number * 1e6)
            if prof is not None:
                prof.disable()
        print(
            f"in-process commit: min {min(per):.1f} median {statistics.median(per):.1f}"
            f" max {max(per):.1f} us CPU per commit ({runs} runs x {number})"
        )
        if prof is not None:
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)

    with tempfile.TemporaryDirectory(prefix="kafkad-commit-") as d:
        asyncio.run(go(d))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--profile", type=Path, help="py-spy the last run's loaded window; folded output here")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--native", action="store_true", help="py-spy --native")
    ap.add_argument("--inproc", action="store_true", help="no sockets: Dispatcher.dispatch in a loop")
    ap.add_argument("--cprofile", action="store_true", help="with --inproc: cProfile top 30")
    args = ap.parse_args(argv)
    if args.inproc:
        inproc(max(args.runs, 5), 5000, args.cprofile)
        return
    global NATIVE
    NATIVE = args.native
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    idle, loaded, rate = [], [], []
    for r in range(args.runs):
        prof = args.profile if r == args.runs - 1 else None
        i, lo, ra = run_once(args.seconds, prof)
        idle.append(i)
        loaded.append(lo)
        rate.append(ra)
        log.info("run %d: idle %.1f%% loaded %.1f%% at %.0f commits/s", r, i, lo, ra)
    cost = [lo - i for i, lo in zip(idle, loaded, strict=True)]
    per = [10 * c / ra for c, ra in zip(cost, rate, strict=True)]  # % of a core / (commits/s) -> ms
    print(f"idle broker, % core        {fmt(spread(idle), digits=1)}")
    print(f"loaded, % core             {fmt(spread(loaded), digits=1)}")
    print(f"commit cost, % core        {fmt(spread(cost), digits=1)}")
    print(f"commits/s                  {fmt(spread(rate), digits=0)}")
    print(f"CPU per commit, ms         {fmt(spread(per), digits=3)}")
    if args.json:
        args.json.write_text(json.dumps({"idle": idle, "loaded": loaded, "rate": rate, "cost": cost}) + "\n")


if __name__ == "__main__":
    main()
