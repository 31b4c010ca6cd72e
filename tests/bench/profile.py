"""Profile kafkad's produce and fetch paths under load with py-spy; write the top costs.

How it works: start a kafkad, put it under load from the worker pool (produce: 4 confluent producers, 100 B,
acks=1, linger.ms=5; small: 64 raw connections, one 1-record Produce in flight each; fetch: raw Fetch
catch-up passes over 256 MiB), and meanwhile run
`py-spy record --pid <kafkad> --format raw` (collapsed stacks). The stacks are folded per function
(line numbers dropped): "self" is the share of samples with that function on top of the stack,
"total" the share with it anywhere on the stack. Results: bench/results/profile-<what>.txt, plus the raw
collapsed stacks next to it (feed them to a flamegraph tool if wanted).

Run: .venv/bin/python -m tests.bench.profile [--what produce,fetch] [--seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.bench.raw_client import bulk_load
from tests.bench.servers import broker_target, create_topic, start_broker
from tests.bench.workers import Job, Pool

log = logging.getLogger("bench.profile")
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
_LINE = re.compile(r":\d+\)$")


def fold(raw: str, top: int = 30) -> str:
    """Top functions by self and by total share of samples, from py-spy's raw (collapsed) output."""
    self_c: collections.Counter[str] = collections.Counter()
    total_c: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames = [_LINE.sub(")", f.strip()) for f in stack.split(";")]
        self_c[frames[-1]] += n
        for f in set(frames):
            total_c[f] += n
    out = [f"{samples} samples"]
    for title, counter in (("self", self_c), ("total (inclusive)", total_c)):
        out.append(f"\n== top {top} by {title}")
        for name, n in counter.most_common(top):
            out.append(f"{100 * n / max(samples, 1):6.2f}%  {name}")
    return "\n".join(out) + "\n"


NATIVE = False  # --native: include C frames (uvloop, syscalls) in the stacks


def _pyspy(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    cmd = [exe, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "200"]
    cmd += ["--format", "raw", "-o", str(out)] + (["--native"] if NATIVE else ["--nonblocking"])
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def profile(what: str, seconds: float, work: Path, out_dir: Path, pool: Pool) -> Path:
    broker = start_broker(work / what)
    try:
        target = broker_target(broker)
        tag = f"{what}-native" if NATIVE else what
        raw_path = out_dir / f"profile-{tag}.collapsed.txt"
        spy: list[subprocess.Popen[bytes]] = []
        if what == "produce":
            create_topic(target.bootstrap, "prof", 1)
            job = Job(
                "produce_throughput",
                {
                    "bootstrap": target.bootstrap,
                    "topic": "prof",
                    "size": 100,
                    "duration_s": seconds + 2,
                    "config": {"acks": "1", "linger.ms": 5},
                },
            )
            spy = []
            pool.run([job] * 4, on_go=lambda: spy.append(_pyspy(target.pid, seconds, raw_path)))
        elif what == "small":
            create_topic(target.bootstrap, "prof", 1)
            job = Job(
                "raw_small_requests",
                {
                    "port": broker.port,
                    "topic": "prof",
                    "connections": 64,
                    "duration_s": seconds + 2,
                    "record_size": 100,
                },
            )
            spy = []
            pool.run([job], on_go=lambda: spy.append(_pyspy(target.pid, seconds, raw_path)))
        else:
            create_topic(target.bootstrap, "prof", 1)
            records = asyncio.run(bulk_load("127.0.0.1", broker.port, "prof", 1, 256 << 20, 1024))
            spy.append(_pyspy(target.pid, seconds, raw_path))
            job = Job(
                "raw_fetch",
                {"port": broker.port, "topic": "prof", "end_offset": records, "max_bytes": 8 << 20},
            )
            while spy[0].poll() is None:
                pool.run([job])
        _, err = spy[0].communicate(timeout=seconds + 60)
        if spy[0].returncode != 0:
            raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')}")
        report = out_dir / f"profile-{tag}.txt"
        report.write_text(
            f"kafkad {what} path under load, py-spy {seconds:g}s\n" + fold(raw_path.read_text())
        )
        return report
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="profile kafkad under load with py-spy")
    p.add_argument("--what", default="produce,fetch")
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--native", action="store_true", help="sample C frames too (uvloop, libc)")
    a = p.parse_args(argv)
    global NATIVE
    NATIVE = a.native
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    a.out.mkdir(parents=True, exist_ok=True)
    pool = Pool(4)
    work = Path(tempfile.mkdtemp(prefix="kafkad-prof-"))
    try:
        for what in a.what.split(","):
            path = profile(what, a.seconds, work, a.out, pool)
            print(path.read_text())
    finally:
        pool.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
