"""`kafkad-spark-ingest`: the nightly job turning shipped segments into Parquet, exactly once.

    kafkad-spark-ingest --landing DIR --output DIR [--master local[*]|spark://HOST:PORT]
    spark-submit kafkad/spark_bridge/ingest.py --landing DIR --output DIR

Output: `<output>/topic=<t>/date=<yyyy-mm-dd>/part-*.parquet` (Spark's partitionBy layout), plus two
hidden entries Spark's readers skip: the ledger `<output>/_kafkad_ingest_ledger.json` (every segment
ingested so far: `topic/partition/base` -> CRC-32C, run id) and the staging area `<output>/_staging/`.

Idempotence (a run killed at any instant, then re-run, gives neither loss nor duplicates):

1. Recover: every `_staging/<run>` left by an earlier run is either complete (its `_KAFKAD_RUN.json`
   intent file exists, written only after Spark finished all its files) and is rolled forward (steps 4-5),
   or incomplete and deleted: its segments are not in the ledger, so this run ingests them again.
2. Select the segments whose manifests are not in the ledger (listing manifests only, so a segment
   still being shipped is invisible until it is complete).
3. Write them with Spark into `_staging/<run>/` (one Spark job per topic, timed for the summary), then
   write the intent file (temp + fsync + rename) naming the segments of the run.
4. Move every staged Parquet file to the same relative path under `<output>` (one atomic rename each;
   names carry Spark's per-job UUID, so they never collide; a file already moved is simply gone from
   staging, so a repeated move is a no-op).
5. Commit: rewrite the ledger atomically with the run's segments added, then delete the staging dir.

The ledger is the commit point and is written strictly after the data: a crash before step 5 leaves
the segments un-ledgered, and the intent file makes the re-run finish the same moves instead of writing
the data a second time. The output must be a filesystem path shared by driver and executors (rename
is what makes step 4 atomic).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkad.spark_bridge.datasource import list_manifests, register
from kafkad.spark_bridge.landing import open_landing
from kafkad.spark_bridge.manifest import Manifest
from kafkad.storage.checkpoints import fsync_dir, write_atomic

log = logging.getLogger("kafkad.spark_bridge.ingest")

LEDGER_FILE = "_kafkad_ingest_ledger.json"
STAGING_DIR = "_staging"
INTENT_FILE = "_KAFKAD_RUN.json"
# Fault injection for the crash tests: SIGKILL ourselves at a named step.
_CRASH_ENV = "KAFKAD_INGEST_CRASH_AT"


def segment_id(m: Manifest) -> str:
    return f"{m.topic}/{m.partition}/{m.base_offset}"


@dataclass(frozen=True, slots=True)
class TopicSummary:
    topic: str
    segments: int
    records: int
    bytes: int
    seconds: float


@dataclass(frozen=True, slots=True)
class IngestSummary:
    run_id: str
    topics: tuple[TopicSummary, ...]
    recovered_runs: int

    @property
    def records(self) -> int:
        return sum(t.records for t in self.topics)

    def table(self) -> str:
        rows = [("topic", "segments", "records", "bytes", "seconds")]
        rows += [
            (t.topic, str(t.segments), str(t.records), str(t.bytes), f"{t.seconds:.1f}") for t in self.topics
        ]
        rows.append(
            (
                "TOTAL",
                str(sum(t.segments for t in self.topics)),
                str(self.records),
                str(sum(t.bytes for t in self.topics)),
                f"{sum(t.seconds for t in self.topics):.1f}",
            )
        )
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = [
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
            for r in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)


# --- ledger ------------------------------------------------------------------------------------
def read_ledger(output: Path) -> dict[str, dict[str, Any]]:
    """Segment id -> {"crc32c": int, "run": str}; {} before the first run."""
    try:
        data = json.loads((output / LEDGER_FILE).read_text())
    except FileNotFoundError:
        return {}
    segments: dict[str, dict[str, Any]] = data["segments"]
    return segments


def _write_ledger(output: Path, segments: dict[str, dict[str, Any]]) -> None:
    body = {"version": 1, "segments": dict(sorted(segments.items()))}
    write_atomic(output / LEDGER_FILE, json.dumps(body, indent=1).encode())


def _maybe_crash(step: str) -> None:
    if os.environ.get(_CRASH_ENV) == step:
        log.warning("crash injected at %s", step)
        os.kill(os.getpid(), signal.SIGKILL)


# --- staging -----------------------------------------------------------------------------------
def _staged_files(stage: Path) -> list[Path]:
    """Data files Spark left in a finished staging dir (its markers and hidden files excluded)."""
    out = []
    for dirpath, _dirs, files in os.walk(stage):
        for f in files:
            if f.startswith(("_", ".")):
                continue
            out.append(Path(dirpath) / f)
    return sorted(out)


def _move_in(stage: Path, output: Path) -> int:
    moved = 0
    parents = {output}
    for src in _staged_files(stage):
        dest = output / src.relative_to(stage)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)
        parents.add(dest.parent)
        moved += 1
        _maybe_crash("mid-move")
    for d in parents:  # the renames must be durable before the ledger says they happened
        fsync_dir(d)
    return moved


def _commit(output: Path, stage: Path, ledger: dict[str, dict[str, Any]]) -> int:
    """Steps 4-5 for a staging dir whose intent file exists. Returns the number of segments ledgered."""
    intent = json.loads((stage / INTENT_FILE).read_text())
    _move_in(stage, output)
    _maybe_crash("before-ledger")
    for seg in intent["segments"]:
        ledger[seg["id"]] = {"crc32c": seg["crc32c"], "run": intent["run"]}
    _write_ledger(output, ledger)
    shutil.rmtree(stage)
    return len(intent["segments"])


def recover(output: Path, ledger: dict[str, dict[str, Any]]) -> int:
    """Step 1: roll forward complete staged runs, delete incomplete ones. Returns runs rolled forward."""
    staging = output / STAGING_DIR
    if not staging.is_dir():
        return 0
    rolled = 0
    for stage in sorted(p for p in staging.iterdir() if p.is_dir()):
        if (stage / INTENT_FILE).exists():
            n = _commit(output, stage, ledger)
            log.info("recovered run %s: %d segments committed", stage.name, n)
            rolled += 1
        else:
            log.info("discarding incomplete run %s", stage.name)
            shutil.rmtree(stage)
    return rolled


def select_new(manifests: Iterable[Manifest], ledger: dict[str, dict[str, Any]]) -> list[Manifest]:
    out = []
    for m in manifests:
        seen = ledger.get(segment_id(m))
        if seen is None:
            out.append(m)
        elif seen["crc32c"] != m.crc32c:
            log.warning(
                "segment %s changed since it was ingested (CRC differs): not re-ingested", segment_id(m)
            )
    return out


# --- the job -----------------------------------------------------------------------------------
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


def run_ingest(
    spark: Any,
    landing: str,
    output: str | os.PathLike[str],
    *,
    run_id: str | None = None,
    on_step: Callable[[str], None] | None = None,
) -> IngestSummary:
    """Ingest every landed segment not in the ledger; returns the per-topic summary."""
    open_landing(landing).check(writable=False)  # a missing root is an error, not "nothing new"
    out = Path(output).absolute()
    out.mkdir(parents=True, exist_ok=True)
    register(spark)
    ledger = read_ledger(out)
    recovered = recover(out, ledger)
    new = select_new(list_manifests(landing), ledger)
    run = run_id or time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
    if not new:
        log.info("nothing new to ingest")
        return IngestSummary(run, (), recovered)
    stage = out / STAGING_DIR / run
    by_topic: dict[str, list[Manifest]] = {}
    for m in new:
        by_topic.setdefault(m.topic, []).append(m)
    log.info("run %s: %d new segments in %d topics", run, len(new), len(by_topic))
    summaries = []
    stop = threading.Event()
    _progress_reporter(spark, stop)
    try:
        for topic, segs in sorted(by_topic.items()):
            started = time.monotonic()
            log.info("topic %s: %d segments, %d records", topic, len(segs), sum(m.record_count for m in segs))
            df = (
                spark.read.format("kafkad")
                .option("manifests", json.dumps([m.manifest_name for m in segs]))
                .load(landing)
            )
            df.write.mode("append").partitionBy("topic", "date").parquet(str(stage))
            if on_step is not None:
                on_step(f"wrote {topic}")
            _maybe_crash("after-write")
            summaries.append(
                TopicSummary(
                    topic,
                    len(segs),
                    sum(m.record_count for m in segs),
                    sum(m.size for m in segs),
                    time.monotonic() - started,
                )
            )
    finally:
        stop.set()
    intent = {"run": run, "segments": [{"id": segment_id(m), "crc32c": m.crc32c} for m in new]}
    write_atomic(stage / INTENT_FILE, json.dumps(intent).encode())
    _maybe_crash("after-intent")
    _commit(out, stage, ledger)
    return IngestSummary(run, tuple(summaries), recovered)


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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:  # before Spark starts: a typo or an unmounted share must fail the nightly job at once
        open_landing(args.landing).check(writable=False)
    except OSError as e:
        print(f"kafkad-spark-ingest: landing {args.landing} is not readable: {e}", file=sys.stderr)
        return 2
    spark = _session(args.master)
    try:
        started = time.monotonic()
        summary = run_ingest(spark, args.landing, args.output)
        print(f"run {summary.run_id}: {len(summary.topics)} topics in {time.monotonic() - started:.1f}s")
        if summary.recovered_runs:
            print(f"recovered {summary.recovered_runs} interrupted run(s)")
        print(summary.table())
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
