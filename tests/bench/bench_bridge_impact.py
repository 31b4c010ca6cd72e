"""Spark bridge impact on a real kafkad: produce throughput with shipping on vs off, and the rate limit.

`python -m tests.bench.bench_bridge_impact [--quick]` prints a table and writes
bench/results/bridge_impact.json.

Each run starts a fresh broker (small `log.segment.bytes`, so segments roll and ship all the time while
records arrive) with `bridge.enabled` true or false and otherwise identical settings; runs are
interleaved off/on, alternating which goes first, and the throughput ratio is taken pair by pair.

Shipping rate: after producing, the on-broker is left to ship its backlog; each landed manifest's
mtime marks the end of its segment's copy. With a backlog, segment i is copied right after segment
i-1, so size_i / (mtime_i - mtime_i-1) is that segment's copy rate: the max over segments is the check
that the limit holds (the token bucket's burst is 1/20 s of the rate). The overall rate (bytes after
the first segment / first-to-last span) also counts the shipper's idle polls between passes, so it
can only be lower.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.bench_groups import (
    RESULTS,
    Spread,
    bench_broker,
    broker_cpu_s,
    fmt,
    produce_records,
    spread,
)
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import create_topics

log = logging.getLogger(__name__)

MIB = 1 << 20
TOPIC = "bench-ship"
WINDOW = 5  # segments


def _manifests(landing: Path) -> list[tuple[int, int]]:
    """(mtime ns, segment size) of every landed manifest, in landing order."""
    out = []
    for p in landing.rglob("*.manifest.json"):
        out.append((p.stat().st_mtime_ns, int(json.loads(p.read_bytes())["size"])))
    return sorted(out)


def _closed_segments(broker: BrokerProcess) -> int:
    part = broker.data_dir / f"{TOPIC}-0"
    return max(0, len(list(part.glob("*.log"))) - 1)


def _wait_shipped(broker: BrokerProcess, landing: Path, want: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(_manifests(landing)) < want:
        if time.monotonic() > deadline or not broker.running:
            raise RuntimeError(
                f"only {len(_manifests(landing))} of {want} segments landed in {timeout_s:.0f} s"
            )
        time.sleep(0.2)


def ship_rates(ms: list[tuple[int, int]]) -> dict[str, float]:
    """Per-segment copy rates (bytes/s) between consecutive manifests, and the overall rate."""
    per = [size / ((t - t0) / 1e9) for (t0, _), (t, size) in itertools.pairwise(ms) if t > t0]
    span = (ms[-1][0] - ms[0][0]) / 1e9 if len(ms) > 1 else 0.0
    overall = sum(size for _, size in ms[1:]) / span if span else 0.0
    # Over WINDOW consecutive segments (~2 s at 20 MiB/s) mtime jitter and the 1/20 s burst wash out.
    win = [
        sum(size for _, size in ms[i + 1 : i + WINDOW + 1]) / ((ms[i + WINDOW][0] - ms[i][0]) / 1e9)
        for i in range(len(ms) - WINDOW)
        if ms[i + WINDOW][0] > ms[i][0]
    ]
    return {
        "segments": float(len(ms)),
        "window_max": max(win, default=0.0),
        "per_segment_max": max(per, default=0.0),
        "per_segment_median": sorted(per)[len(per) // 2] if per else 0.0,
        "overall": overall,
    }


def one_run(enabled: bool, size: int, n: int, limit: int, segment_bytes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kafkad-landing-") as ld:
        landing = Path(ld)
        overrides = {
            "bridge.enabled": str(enabled).lower(),
            "bridge.landing.dir": str(landing),
            "bridge.topics": TOPIC,
            "bridge.rate.limit.bytes.per.sec": str(limit),
            "bridge.max.segment.age.ms": "2000",  # shipper polls every 1 s
            "log.segment.bytes": str(segment_bytes),
        }
        with bench_broker(overrides) as (broker, _):
            create_topics(broker.bootstrap, {TOPIC: 1})
            c0, t0 = broker_cpu_s(broker), time.monotonic()
            rps = produce_records(broker.bootstrap, TOPIC, n, size)
            cpu = 100 * (broker_cpu_s(broker) - c0) / (time.monotonic() - t0)
            out = {"rps": rps, "mb_per_s": rps * size / 1e6, "broker_cpu_pct": cpu}
            if enabled:
                out["landed_during_produce"] = float(len(_manifests(landing)))
                closed = _closed_segments(broker)
                _wait_shipped(broker, landing, closed, 30 + closed * segment_bytes / limit * 2)
                out.update(ship_rates(_manifests(landing)))
            return out


def bench_size(size: int, n: int, runs: int, limit: int, segment_bytes: int) -> dict[str, Any]:
    off: list[dict[str, float]] = []
    on: list[dict[str, float]] = []
    for r in range(runs):
        for enabled in (False, True) if r % 2 == 0 else (True, False):
            res = one_run(enabled, size, n, limit, segment_bytes)
            (on if enabled else off).append(res)
            log.info("%d B run %d bridge=%s: %.0f rec/s %s", size, r, enabled, res["rps"], res)

    def col(rows: list[dict[str, float]], key: str) -> dict[str, float]:
        return _sp(spread([row[key] for row in rows]))

    return {
        "record_bytes": size,
        "records": n,
        "runs": runs,
        "off_rps": col(off, "rps"),
        "on_rps": col(on, "rps"),
        "ratio": _sp(spread([b["rps"] / a["rps"] for a, b in zip(off, on, strict=True)])),
        "off_mb_per_s": col(off, "mb_per_s"),
        "on_mb_per_s": col(on, "mb_per_s"),
        "off_broker_cpu_pct": col(off, "broker_cpu_pct"),
        "on_broker_cpu_pct": col(on, "broker_cpu_pct"),
        "segments_landed": col(on, "segments"),
        "landed_during_produce": col(on, "landed_during_produce"),
        "ship_per_segment_max_bps": col(on, "per_segment_max"),
        "ship_per_segment_median_bps": col(on, "per_segment_median"),
        "ship_overall_bps": col(on, "overall"),
        "ship_window_max_bps": col(on, "window_max"),
    }


def _sp(s: Spread) -> dict[str, float]:
    return {"min": s.min, "median": s.median, "max": s.max, "n": float(s.n)}


def _s(d: dict[str, float], digits: int = 0, unit: str = "", scale: float = 1.0) -> str:
    return fmt(Spread(d["min"] * scale, d["median"] * scale, d["max"] * scale, int(d["n"])), unit, digits)


def print_table(res: dict[str, Any]) -> None:
    lim = res["rate_limit_bytes_per_sec"]
    print(
        f"\nBridge impact: segment {res['segment_bytes'] // MIB} MiB, rate limit {lim / MIB:.0f} MiB/s"
        " (min / median / max over runs)"
    )
    for row in res["sizes"]:
        print(f"  {row['record_bytes']:>5} B x {row['records']:,} records, {row['runs']} runs each")
        print(f"     produce rec/s  bridge off {_s(row['off_rps'])} | on {_s(row['on_rps'])}")
        print(f"     ratio on/off   {_s(row['ratio'], 3)}   (pair by pair)")
        print(
            f"     broker CPU %   off {_s(row['off_broker_cpu_pct'], 1)} | on {_s(row['on_broker_cpu_pct'], 1)}"
        )
        print(
            f"     segments landed {_s(row['segments_landed'])} (during produce {_s(row['landed_during_produce'])})"
        )
        print(
            f"     ship MiB/s     per-segment max {_s(row['ship_per_segment_max_bps'], 2, '', 1 / MIB)}"
            f" | per-segment median {_s(row['ship_per_segment_median_bps'], 2, '', 1 / MIB)}"
            f" | overall {_s(row['ship_overall_bps'], 2, '', 1 / MIB)}"
        )
        print(
            f"     ship MiB/s     max over {WINDOW}-segment windows {_s(row['ship_window_max_bps'], 2, '', 1 / MIB)}"
            f"  (worst / limit: {WINDOW}-segment {row['ship_window_max_bps']['max'] / lim:.3f},"
            f" single segment {row['ship_per_segment_max_bps']['max'] / lim:.3f})"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="fewer records and runs")
    ap.add_argument("--out", type=Path, default=RESULTS / "bridge_impact.json")
    ap.add_argument("--rate-mib", type=float, default=20.0, help="bridge.rate.limit.bytes.per.sec in MiB/s")
    ap.add_argument("--runs", type=int, default=0, help="runs per setting (default: quick 2, full 3)")
    ap.add_argument("--segment-mib", type=int, default=8, help="log.segment.bytes in MiB")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    q = args.quick
    limit, seg = int(args.rate_mib * MIB), args.segment_mib * MIB
    plan = [(100, 1_000_000 if q else 2_000_000), (1024, 300_000 if q else 600_000)]
    res: dict[str, Any] = {
        "quick": q,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "rate_limit_bytes_per_sec": limit,
        "segment_bytes": seg,
        "sizes": [bench_size(size, n, args.runs or (2 if q else 3), limit, seg) for size, n in plan],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print_table(res)
    return res


if __name__ == "__main__":
    main()
