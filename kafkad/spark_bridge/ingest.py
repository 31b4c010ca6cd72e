"""`kafkad-spark-ingest`: the nightly job turning shipped segments of every site into Parquet, exactly once.

    kafkad-spark-ingest --landing DIR|s3://BUCKET/PREFIX --output DIR [--master local[*]|spark://HOST:PORT]
                        [--summary-json FILE] [--legacy-site NAME] [--quarantine PREFIX]
                        [--s3-endpoint-url URL] [--s3-region REGION]
    spark-submit kafkad/spark_bridge/ingest.py --landing DIR --output DIR

Output: `<output>/site=<s>/topic=<t>/date=<yyyy-mm-dd>/part-*.parquet` (Spark's partitionBy layout:
a query for one site, topic and day reads only its files), each row with its `site` and `cluster_id`;
plus entries Spark's readers skip: the ledger `_kafkad_ingest_ledger.json` (offset ranges ingested
per site/topic/partition, see `ledger.py`), the run summary `_kafkad_ingest_summary.json` (see
`report.py`) and the staging area `_staging/`.

A run, idempotent (killed at any instant then re-run: neither loss nor duplicates):

1. List the landing's manifests (names only) and recover: a version-1 ledger is migrated; every
   `_staging/<run>` left by an earlier run is rolled forward if its intent file exists (written only
   after Spark finished all its files), else deleted (its ranges are not in the ledger: redone).
2. Plan: a manifest whose name's range the ledger already covers is not even read; the others are
   read and `plan.assign` gives each (site, topic, partition) the offsets that neither the ledger nor
   another object of the run holds, so a segment shipped twice or overlapping ranges of two leaders
   yield each record once. Objects are cut into pieces and packed into input partitions.
3. One Spark job reads the plan (`planFile`) and writes `_staging/<run>/`; then the intent file
   (run id, ranges per stream; temp + fsync + rename).
4. Move every staged Parquet file to the same relative path under `<output>` (one atomic rename each;
   Spark's per-job UUID in the names avoids collisions; a file already moved is simply gone).
5. Commit: rewrite the ledger atomically with the run's ranges added, then delete the staging dir.

The ledger is the commit point and is written strictly after the data. The output must be a
filesystem path shared by driver and executors (rename is what makes step 4 atomic). The landing may
be an S3 bucket (`s3://bucket/prefix`, see `s3.py`): the driver resolves its endpoint and region and
hands that URI to the executors, which read the objects through pyarrow with their own credentials.
Damaged or foreign objects stop a run before it commits anything, naming their keys; `--quarantine`
moves them aside (see `damaged.py`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kafkad.spark_bridge.damaged import (
    Damaged,
    DamagedLanding,
    check_quarantine,
    keys_in,
    move_aside,
    relative,
)
from kafkad.spark_bridge.datasource import DEFAULT_SPLIT_BYTES, LEGACY_SITE, register
from kafkad.spark_bridge.landing import LandingStore, open_landing
from kafkad.spark_bridge.ledger import (
    STAGING_DIR,
    Ledger,
    commit,
    maybe_crash,
    migrate_v1,
    read_ledger,
    recover,
    write_intent,
)
from kafkad.spark_bridge.manifest import MANIFEST_SUFFIX, Manifest, parse_manifest_name
from kafkad.spark_bridge.plan import Range, SegmentPiece, StreamKey, assign, covers, merge, plan_pieces
from kafkad.spark_bridge.report import SUMMARY_FILE, IngestSummary, TopicSummary
from kafkad.spark_bridge.s3 import S3Options

log = logging.getLogger("kafkad.spark_bridge.ingest")

__all__ = ["STAGING_DIR", "IngestPlan", "plan_run", "read_ledger", "run_ingest"]


@dataclass(slots=True)
class IngestPlan:
    pieces: list[SegmentPiece]
    added: dict[StreamKey, list[Range]]  # ranges this run ingests, per stream
    objects: dict[StreamKey, int]  # objects read per stream
    landed_end: dict[StreamKey, int]  # per stream: last landed offset + 1
    manifests_listed: int
    manifests_read: int
    damaged: list[Damaged] = field(default_factory=list)  # left out of the plan


def plan_run(
    store: LandingStore,
    names: Sequence[str],
    ledger: Ledger,
    *,
    legacy_site: str,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    sizes: Mapping[str, int] | None = None,
) -> IngestPlan:
    """Step 2: what to read, from the manifest names, the ledger and the manifests not yet covered.

    `sizes` (every object's size, from the listing): a manifest whose `.log` is missing or of another
    size is damaged, like one that does not parse or names other offsets than its key; damaged
    objects are left out of the plan and listed in `damaged`.
    """
    streams: dict[StreamKey, list[Manifest]] = defaultdict(list)
    landed_end: dict[StreamKey, int] = {}
    clusters: dict[str, str] = {}
    damaged: list[Damaged] = []
    read = 0
    for name in names:
        key = parse_manifest_name(name)
        if key is None:
            log.warning("ignoring %s: not a manifest name of the landing layout", name)
            continue
        if key.site is not None:
            sk = (key.site, key.topic, key.partition)
            landed_end[sk] = max(landed_end.get(sk, 0), key.last_offset + 1)
            if key.last_offset < key.first_offset or covers(
                ledger.get(sk, ()), key.first_offset, key.last_offset
            ):
                continue  # already ingested (or empty): not even read
        raw = store.read_bytes(name)
        if raw is None:
            raise FileNotFoundError(f"manifest {name} vanished from {store.uri}")
        read += 1
        try:
            m = Manifest.from_json(raw)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            damaged.append(Damaged(name, f"not a kafkad manifest ({type(e).__name__}: {e})"))
            continue
        if key.site is not None and (m.manifest_name != name or key.last_offset != m.last_offset):
            damaged.append(Damaged(name, f"its content describes {m.manifest_name}, not this key"))
            continue
        if sizes is not None and sizes.get(m.log_name) != m.size:
            got = sizes.get(m.log_name)
            why = "is missing" if got is None else f"has {got} bytes, its manifest says {m.size}"
            damaged.append(Damaged(name, f"its data object {m.log_name} {why}"))
            continue
        sk = (m.site if m.site is not None else legacy_site, m.topic, m.partition)
        if m.cluster_id is not None and clusters.setdefault(sk[0], m.cluster_id) != m.cluster_id:
            raise ValueError(
                f"site {sk[0]} holds objects of clusters {clusters[sk[0]]} and {m.cluster_id} ({name}): "
                "their offsets would collide; give each cluster its own bridge.site"
            )
        landed_end[sk] = max(landed_end.get(sk, 0), m.last_offset + 1)
        streams[sk].append(m)
    pieces: list[SegmentPiece] = []
    added: dict[StreamKey, list[Range]] = {}
    objects: dict[StreamKey, int] = {}
    for sk, ms in sorted(streams.items()):
        assignments, _ = assign(ms, ledger.get(sk, ()))
        if not assignments:
            continue
        added[sk] = merge(r for a in assignments for r in a.ranges)
        objects[sk] = len(assignments)
        for a in assignments:
            pieces += plan_pieces(a.manifest, store.uri, split_bytes, site=sk[0], ranges=a.ranges)
    return IngestPlan(pieces, added, objects, landed_end, len(names), read, damaged)


def _progress_reporter(spark: Any, stop: threading.Event, interval_s: float = 2.0) -> threading.Thread:
    """Logs running stages' task counts while a Spark job runs."""

    def loop() -> None:
        tracker = spark.sparkContext.statusTracker()
        while not stop.wait(interval_s):
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info is not None:
                    log.info(
                        "stage %d: %d/%d tasks done, %d running",
                        sid,
                        info.numCompletedTasks,
                        info.numTasks,
                        info.numActiveTasks,
                    )

    t = threading.Thread(target=loop, name="ingest-progress", daemon=True)
    t.start()
    return t


def _staged_rows(stage: Path) -> dict[tuple[str, str], tuple[int, int]]:
    """(site, topic) -> (rows, bytes) of the staged Parquet files, from their footers."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for f in stage.rglob("*.parquet"):
        parts = dict(p.split("=", 1) for p in f.relative_to(stage).parts[:-1] if "=" in p)
        key = (parts["site"], parts["topic"])
        rows, size = out.get(key, (0, 0))
        out[key] = (rows + pq.read_metadata(f).num_rows, size + f.stat().st_size)
    return out


def _summaries(
    plan: IngestPlan, ledger: Ledger, staged: dict[tuple[str, str], tuple[int, int]]
) -> tuple[TopicSummary, ...]:
    """Per site and topic (after the commit: `ledger` holds this run's ranges)."""
    by_topic: dict[tuple[str, str], list[StreamKey]] = defaultdict(list)
    for sk in {*plan.landed_end, *plan.added}:
        by_topic[(sk[0], sk[1])].append(sk)
    read: dict[tuple[str, str], int] = defaultdict(int)
    for p in plan.pieces:
        read[(p.site, p.topic)] += p.end - p.start
    out = []
    for (site, topic), keys in sorted(by_topic.items()):
        lag = missing = 0
        for sk in keys:
            ranges = ledger.get(sk, [])
            end = ranges[-1][1] + 1 if ranges else 0
            lag += max(0, plan.landed_end.get(sk, 0) - end)
            missing += sum(b[0] - a[1] - 1 for a, b in itertools.pairwise(ranges))
        bytes_read = read.get((site, topic), 0)
        rows, parquet_bytes = staged.get((site, topic), (0, 0))
        if not rows and not lag and not any(sk in plan.added for sk in keys):
            continue
        out.append(
            TopicSummary(
                site=site,
                topic=topic,
                objects=sum(plan.objects.get(sk, 0) for sk in keys),
                records=rows,
                bytes=bytes_read,
                parquet_bytes=parquet_bytes,
                ranges={sk[2]: tuple(plan.added[sk]) for sk in sorted(keys) if sk in plan.added},
                lag_offsets=lag,
                missing_offsets=missing,
            )
        )
    return tuple(out)


def run_ingest(
    spark: Any,
    landing: str,
    output: str | os.PathLike[str],
    *,
    run_id: str | None = None,
    legacy_site: str = LEGACY_SITE,
    summary_path: str | os.PathLike[str] | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    on_step: Callable[[str], None] | None = None,
    quarantine: str | None = None,
    s3: S3Options | None = None,
) -> IngestSummary:
    """Ingest every landed offset not in the ledger; returns (and writes) the per-site/topic summary.

    DamagedLanding if the landing holds damaged objects (nothing committed); with `quarantine` they
    are moved there (see `damaged.py`)."""
    store = open_landing(landing, s3)
    store.check(writable=False)  # a missing root (or bucket) is an error, not "nothing new"
    if quarantine is not None:
        check_quarantine(store, quarantine)
    out = Path(output).absolute()
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    started = time.monotonic()
    objects = store.list_objects()
    names = sorted(n for n in objects if n.endswith(MANIFEST_SUFFIX))
    timings["listing"] = time.monotonic() - started
    t = time.monotonic()
    recovered = migrate_v1(out, store, legacy_site)
    ledger = read_ledger(out)
    recovered += recover(out, ledger)
    plan = plan_run(store, names, ledger, legacy_site=legacy_site, split_bytes=split_bytes, sizes=objects)
    if plan.damaged:
        if quarantine is None:
            raise DamagedLanding(store, plan.damaged, None)
        move_aside(store, plan.damaged, quarantine, objects)
    timings["planning"] = time.monotonic() - t
    run = run_id or time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
    staged: dict[tuple[str, str], tuple[int, int]] = {}
    if not plan.pieces and not plan.added:
        log.info("nothing new to ingest (%d manifests listed)", len(names))
    else:
        stage = out / STAGING_DIR / run
        stage.mkdir(parents=True)
        plan_file = stage / "_plan.json"
        plan_file.write_text(json.dumps([p.to_json() for p in plan.pieces]))
        log.info(
            "run %s: %d streams, %d pieces, %d bytes",
            run,
            len(plan.added),
            len(plan.pieces),
            sum(p.end - p.start for p in plan.pieces),
        )
        t = time.monotonic()
        if plan.pieces:
            # Input partitions of up to split_bytes, but at least two per core: small segments add up.
            total = sum(p.end - p.start for p in plan.pieces)
            cores = int(spark.sparkContext.defaultParallelism)
            pack_bytes = max(1 << 16, min(split_bytes, total // (2 * max(1, cores)) + 1))
            register(spark)
            stop = threading.Event()
            _progress_reporter(spark, stop)
            try:
                df = (
                    spark.read.format("kafkad")
                    .option("planFile", str(plan_file))
                    .option("splitBytes", str(pack_bytes))
                    .load(store.uri)
                )
                df.write.mode("append").partitionBy("site", "topic", "date").parquet(str(stage))
            except Exception as e:  # an executor found a damaged object: name it (and move it aside)
                found = [r for k in keys_in(str(e)) if (r := relative(store, k)) is not None]
                if not found:
                    raise
                bad = [Damaged(n, "fails its CRC-32C or batch checks") for n in found]
                if quarantine is not None:
                    move_aside(store, bad, quarantine, objects)
                raise DamagedLanding(store, bad, quarantine) from None
            finally:
                stop.set()
        timings["spark"] = time.monotonic() - t
        if on_step is not None:
            on_step("wrote")
        maybe_crash("after-write")
        t = time.monotonic()
        staged = _staged_rows(stage)
        write_intent(stage, run, plan.added)
        maybe_crash("after-intent")
        commit(out, stage, ledger)
        timings["commit"] = time.monotonic() - t
    timings["total"] = time.monotonic() - started
    summary = IngestSummary(
        run,
        _summaries(plan, ledger, staged),
        recovered,
        timings,
        plan.manifests_listed,
        plan.manifests_read,
        int(time.time() * 1000),
    )
    summary.write(Path(summary_path) if summary_path is not None else out / SUMMARY_FILE)
    return summary


def _session(master: str | None) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("kafkad-spark-ingest")
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit, which sets the master
        builder = builder.master("local[*]")
    return builder.getOrCreate()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkad-spark-ingest", description=__doc__.splitlines()[0])
    parser.add_argument("--landing", required=True, help="landing dir (or pyarrow URI) the shipper writes")
    parser.add_argument("--output", required=True, help="Parquet output dir (shared filesystem)")
    parser.add_argument("--master", default=None, help="Spark master (default local[*], or spark-submit's)")
    parser.add_argument(
        "--summary-json", default=None, help=f"JSON summary of the run (default <output>/{SUMMARY_FILE})"
    )
    parser.add_argument(
        "--legacy-site",
        default=LEGACY_SITE,
        help=f"site of objects shipped before sites existed (default {LEGACY_SITE!r})",
    )
    parser.add_argument(
        "--quarantine",
        default=None,
        metavar="PREFIX",
        help="move damaged or foreign objects of the landing here (same filesystem, outside the landing)",
    )
    parser.add_argument("--s3-endpoint-url", default=None, help="S3 endpoint (default: AWS_ENDPOINT_URL)")
    parser.add_argument("--s3-region", default=None, help="S3 region (default: AWS_REGION)")
    args = parser.parse_args(argv)
    s3 = S3Options(endpoint_url=args.s3_endpoint_url, region=args.s3_region)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:  # before Spark starts: a typo or an unmounted share must fail the nightly job at once
        store = open_landing(args.landing, s3)
        store.check(writable=args.quarantine is not None)
        if args.quarantine is not None:
            check_quarantine(store, args.quarantine)
    except ValueError as e:
        print(f"kafkad-spark-ingest: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kafkad-spark-ingest: landing {args.landing} is not readable: {e}", file=sys.stderr)
        return 2
    spark = _session(args.master)
    try:
        started = time.monotonic()
        summary = run_ingest(
            spark,
            args.landing,
            args.output,
            legacy_site=args.legacy_site,
            summary_path=args.summary_json,
            quarantine=args.quarantine,
            s3=s3,
        )
        print(f"run {summary.run_id}: {len(summary.topics)} site topics in {time.monotonic() - started:.1f}s")
        if summary.recovered_runs:
            print(f"recovered {summary.recovered_runs} interrupted run(s)")
        print(summary.table())
    except DamagedLanding as e:
        print(f"kafkad-spark-ingest: {e}", file=sys.stderr)
        return 3
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
