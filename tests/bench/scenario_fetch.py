"""Fetch catch-up (measurement 3): read back a partition that already holds `fetch_bytes`.

kafkad is read by the raw Fetch client and by a confluent-kafka consumer; the baseline streams the very
segment files kafkad holds with plain os.sendfile over loopback. CPU per GiB is the serving process's.
"""

from __future__ import annotations

import asyncio
import logging

from tests.bench.context import Context, GiB
from tests.bench.raw_client import bulk_load
from tests.bench.servers import ChildServer, CpuMeter, Target, create_topic
from tests.bench.stats import Row, figure, ratio
from tests.bench.stats import Target as Goal
from tests.bench.workers import Job

log = logging.getLogger(__name__)
TOPIC = "fetchsrc"


def _measure(ctx: Context, target: Target, job: Job, passes: int = 1) -> tuple[float, float]:
    """(MB/s, server CPU seconds per GiB) over `passes` back-to-back reads: psutil's CPU times tick
    every 10 ms, so a 256 MiB read that takes 0.1 s needs repeating to be measured to a few percent."""
    meter = CpuMeter(target)
    meter.start()
    nbytes = 0
    seconds = 0.0
    for _ in range(passes):
        r = ctx.pool.run([job]).results[0]
        nbytes += r["bytes"]
        seconds += r["s"]
    meter.stop()
    return nbytes / seconds / 1e6, meter.seconds / (nbytes / GiB)


def fetch(ctx: Context) -> None:
    create_topic(ctx.kafkad.bootstrap, TOPIC, 1)
    records = asyncio.run(bulk_load("127.0.0.1", ctx.broker.port, TOPIC, 1, ctx.settings.fetch_bytes, 1024))
    files = sorted(str(p) for p in (ctx.broker.data_dir / f"{TOPIC}-0").glob("*.log"))
    log.info("fetch: %d records in %s", records, files)
    sendfile = ChildServer("sendfile", "tests.bench.sendfile_server", files, ctx.work / "sendfile.log")
    try:
        raw: list[tuple[float, float]] = []
        ck: list[tuple[float, float]] = []
        base: list[tuple[float, float]] = []
        passes = max(1, (2 * GiB) // ctx.settings.fetch_bytes)
        for _ in range(ctx.settings.runs):
            base.append(_measure(ctx, sendfile.target, Job("raw_drain", {"port": sendfile.port}), passes))
            raw.append(
                _measure(
                    ctx,
                    ctx.kafkad,
                    Job(
                        "raw_fetch",
                        {
                            "port": ctx.broker.port,
                            "topic": TOPIC,
                            "end_offset": records,
                            "max_bytes": 8 << 20,
                        },
                    ),
                    passes,
                )
            )
            ck.append(
                _measure(
                    ctx,
                    ctx.kafkad,
                    Job(
                        "consume_all",
                        {
                            "bootstrap": ctx.kafkad.bootstrap,
                            "topic": TOPIC,
                            "end_offset": records,
                            "config": {},
                        },
                    ),
                )
            )
    finally:
        sendfile.stop()
    size = f"{ctx.settings.fetch_bytes // (1 << 20)} MiB"
    bt = figure("sendfile MB/s", "MB/s", [a for a, _ in base])
    bc = figure("sendfile cpu/GiB", "cpu-s/GiB", [c for _, c in base])
    for name, data, goal in (("raw Fetch", raw, True), ("confluent consumer", ck, False)):
        t = figure(f"{name} MB/s", "MB/s", [a for a, _ in data])
        c = figure(f"{name} cpu/GiB", "cpu-s/GiB", [c for _, c in data])
        ctx.rows.append(
            Row(
                "fetch",
                f"catch-up {size}, {name} MB/s",
                t,
                bt,
                "sendfile",
                ratio("", t, bt),
                Goal(">=", 0.8) if goal else None,
                True,
            )
        )
        ctx.rows.append(
            Row(
                "fetch",
                f"catch-up {size}, {name} cpu-s/GiB",
                c,
                bc,
                "sendfile",
                ratio("", c, bc),
                Goal("<=", 1.2) if goal else None,
                True,
            )
        )
