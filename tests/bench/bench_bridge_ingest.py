"""Benchmark of `kafkad-spark-ingest` over a fleet's landing: many sites x topics x partitions of small segments.

    .venv/bin/python -m tests.bench.bench_bridge_ingest [--quick] [--sites 100] [--cores 2]

Builds a landing of `--sites` sites x 10 topics x 4 partitions x 2 small segments (5 batches of 10
records each, 100-byte values), written straight as the shipper lays it out (data, then manifest). Figures:

* listing (`list_manifests`) and planning (`plan_run`, first run: reads every manifest) at 1/4, 1/2 and all
  of the sites, as microseconds per object (min / median / max over interleaved rounds): flat means
  linear in the segment count;
* planning of a re-run (everything in the ledger: names only, no manifest read), per object;
* one full ingest with a local Spark of `--cores` cores, after a one-site warm-up ingest (the session's
  first job pays the JVM's and the Python workers' start): records/s, and records/s per core (records
  over the Spark job's wall time times the cores);
* a re-run: seconds, and that it ingested nothing.

Writes bench/results/bridge_ingest.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kafkad.spark_bridge.ingest import plan_run, run_ingest
from kafkad.spark_bridge.landing import FilesystemLanding
from kafkad.spark_bridge.manifest import build_manifest
from kafkad.storage.records import Compression, SimpleRecord, build_batch
from tests.spark.conftest import local_session

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
TOPICS = 10
PARTITIONS = 4
SEGMENTS = 2
BATCHES = 5
RECORDS_PER_BATCH = 10
T0 = 1_700_000_000_000


def _segment(base: int) -> bytes:
    out = bytearray()
    for b in range(BATCHES):
        first = base + b * RECORDS_PER_BATCH
        recs = [
            SimpleRecord(b"k%d" % (first + i), bytes([i % 251]) * 100, (), T0 + first + i)
            for i in range(RECORDS_PER_BATCH)
        ]
        out += build_batch(recs, compression=Compression.LZ4, base_offset=first)
    return bytes(out)


def build_landing(root: Path, sites: int) -> int:
    """Returns the number of objects written."""
    per_segment = BATCHES * RECORDS_PER_BATCH
    blobs = [_segment(k * per_segment) for k in range(SEGMENTS)]
    n = 0
    for s in range(sites):
        site = f"site{s:03d}"
        for t in range(TOPICS):
            for p in range(PARTITIONS):
                for k, data in enumerate(blobs):
                    m = build_manifest(
                        f"topic{t}", p, k * per_segment, data, site=site, cluster_id=f"cluster-{s}"
                    )
                    target = root / m.log_name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                    (root / m.manifest_name).write_bytes(m.to_json())
                    n += 1
    return n


def _per_object(values: list[float], objects: int) -> dict[str, float]:
    us = sorted(v / objects * 1e6 for v in values)
    return {"min": us[0], "median": statistics.median(us), "max": us[-1]}


def listing_and_planning(roots: dict[int, Path], runs: int) -> list[dict[str, Any]]:
    """Per landing: listing and first-run planning, microseconds per object (min / median / max).

    Runs are interleaved across the landings (round after round), so the landings share the
    machine's noise and the per-object figures compare."""
    times: dict[int, tuple[list[float], list[float]]] = {n: ([], []) for n in roots}
    objects: dict[int, int] = {}
    for _ in range(runs):
        for n, root in roots.items():
            store = FilesystemLanding(root)
            t = time.perf_counter()
            names = store.list_manifests()
            times[n][0].append(time.perf_counter() - t)
            t = time.perf_counter()
            plan_run(store, names, {}, legacy_site="legacy")
            times[n][1].append(time.perf_counter() - t)
            objects[n] = len(names)
    return [
        {
            "sites": n,
            "objects": objects[n],
            "listing_us_per_object": _per_object(times[n][0], objects[n]),
            "planning_us_per_object": _per_object(times[n][1], objects[n]),
        }
        for n in roots
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="10 sites instead of 100")
    ap.add_argument("--sites", type=int, default=None)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--runs", type=int, default=7, help="rounds of listing/planning over the scales")
    ap.add_argument("--out", type=Path, default=RESULTS / "bridge_ingest.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    sites = args.sites or (10 if args.quick else 100)
    work = Path(tempfile.mkdtemp(prefix="kafkad-bench-ingest-"))
    result: dict[str, Any] = {
        "sites": sites,
        "topics": TOPICS,
        "partitions": PARTITIONS,
        "segments": SEGMENTS,
    }
    try:
        roots: dict[int, Path] = {}
        for share in (4, 2, 1):
            n = max(1, sites // share)
            roots[n] = work / f"landing-{n}"
            roots[n].mkdir(exist_ok=True)
            build_landing(roots[n], n)
        scales = listing_and_planning(roots, args.runs)
        for row in scales:
            lst, pln = row["listing_us_per_object"], row["planning_us_per_object"]
            print(
                f"{row['sites']:4d} sites, {row['objects']:6d} objects: us per object, min / median / max: "
                f"listing {lst['min']:.1f} / {lst['median']:.1f} / {lst['max']:.1f}, planning (first run) "
                f"{pln['min']:.1f} / {pln['median']:.1f} / {pln['max']:.1f}",
                flush=True,
            )
        result["scales"] = scales
        landing, output = work / f"landing-{sites}", work / "out"
        records = sites * TOPICS * PARTITIONS * SEGMENTS * BATCHES * RECORDS_PER_BATCH
        spark = local_session("kafkad-bench-ingest", args.cores, "1g")
        try:
            # The session's first job starts the JVM's JIT and the Python workers (imports): measured
            # apart on a one-site landing, so the figures below are the steady state.
            warm = work / "warm-landing"
            warm.mkdir()
            build_landing(warm, 1)
            cold = run_ingest(spark, str(warm), work / "warm-out")
            result["warm_up"] = {"objects": TOPICS * PARTITIONS * SEGMENTS, "timings_s": dict(cold.timings_s)}
            print(
                f"warm-up ingest of one site (first Spark job of the session): {cold.timings_s['spark']:.1f} s"
            )
            summary = run_ingest(spark, str(landing), output)
            assert summary.records == records, (summary.records, records)
            again = run_ingest(spark, str(landing), output)
            assert again.topics == () and again.manifests_read == 0
        finally:
            spark.stop()
        spark_s = summary.timings_s["spark"]
        result["ingest"] = {
            "records": records,
            "timings_s": dict(summary.timings_s),
            "records_per_s": records / spark_s,
            "records_per_s_per_core": records / spark_s / args.cores,
            "cores": args.cores,
            "parquet_files": sum(1 for _ in output.rglob("*.parquet")),
        }
        result["rerun"] = {
            "timings_s": dict(again.timings_s),
            "planning_us_per_object": again.timings_s["planning"] / scales[-1]["objects"] * 1e6,
        }
        t = summary.timings_s
        print(
            f"ingest of {records} records in {scales[-1]['objects']} objects: listing {t['listing']:.2f} s, "
            f"planning {t['planning']:.2f} s, Spark {t['spark']:.1f} s, commit {t['commit']:.2f} s; "
            f"{records / spark_s:,.0f} records/s = {records / spark_s / args.cores:,.0f} records/s per core "
            f"({args.cores} cores)"
        )
        r = again.timings_s
        print(
            f"re-run: nothing new, {r['total']:.2f} s (listing {r['listing']:.2f} s, planning "
            f"{r['planning']:.2f} s = {result['rerun']['planning_us_per_object']:.1f} us/object)"
        )
        result["loadavg"] = os.getloadavg()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
