"""Benchmark of the bridge over S3: shipping to an S3 endpoint, and ingesting from it.

    .venv/bin/python -m tests.bench.bench_bridge_s3 [--quick] [--rounds N] [--cores 2]

The endpoint is moto's S3 server (`moto_server`, a process of its own on 127.0.0.1). The segments:
`--segments` closed segments of `--segment-mib` MiB (1 KiB values, uncompressed, 100 records a batch)
over 4 partitions. Figures, each round interleaving the two sides (min / median / max over rounds):

* shipping MB/s: `Shipper.run_once` of every segment to a fresh prefix (temp object, server-side
  copy into place, manifest) against `pyarrow.fs.copy_files` of the same segment files to another
  fresh prefix (one plain upload each) with the same filesystem options; the ratio per round;
* ingest records/s: `run_ingest` from the S3 landing against from a local landing holding the same
  objects, each into a fresh output, on a local Spark of `--cores` cores after one warm-up ingest;
  records over the Spark job's wall time; the ratio per round.

Writes bench/results/bridge_s3.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kafkad.clock import ManualClock
from kafkad.spark_bridge.ingest import run_ingest
from kafkad.spark_bridge.landing import FilesystemLanding, open_landing
from kafkad.spark_bridge.position import LocalPositionStore
from kafkad.spark_bridge.s3 import canonical_uri
from kafkad.spark_bridge.s3 import filesystem as s3_filesystem
from kafkad.spark_bridge.segment_source import DirectorySegmentSource
from kafkad.spark_bridge.shipper import Shipper, ShipperConfig
from kafkad.storage.records import Compression, SimpleRecord, build_batch
from tests.spark.conftest import local_session

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
PARTITIONS = 4
T0 = 1_700_000_000_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def build_logs(logs: Path, segments: int, segment_mib: int) -> int:
    """Closed segments spread over the partitions; returns the records written."""
    records = 0
    offsets = [0] * PARTITIONS
    for k in range(segments):
        p = k % PARTITIONS
        pdir = logs / f"bench-{p}"
        pdir.mkdir(parents=True, exist_ok=True)
        base = offsets[p]
        out = bytearray()
        while len(out) < segment_mib << 20:
            first = offsets[p]
            recs = [
                SimpleRecord(b"k%d" % (first + i), os.urandom(16) * 64, (), T0 + first + i)
                for i in range(100)
            ]
            out += build_batch(recs, compression=Compression.NONE, base_offset=first)
            offsets[p] += len(recs)
            records += len(recs)
        (pdir / f"{base:020d}.log").write_bytes(bytes(out))
    for p in range(PARTITIONS):
        (logs / f"bench-{p}" / f"{offsets[p]:020d}.log").write_bytes(b"")
    return records


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _fmt(s: dict[str, float], digits: int = 1) -> str:
    return f"{s['min']:.{digits}f} / {s['median']:.{digits}f} / {s['max']:.{digits}f}"


def ship_round(logs: Path, work: Path, uri: str) -> tuple[float, int]:
    positions = LocalPositionStore(work / f"positions-{uuid.uuid4().hex[:6]}")
    shipper = Shipper(
        ShipperConfig(site="bench"),
        DirectorySegmentSource([logs]),
        open_landing(uri),
        positions,
        clock=ManualClock(),
    )
    t = time.perf_counter()
    results = shipper.run_once()
    elapsed = time.perf_counter() - t
    assert shipper.failures == 0 and all(r.copied for r in results)
    return elapsed, shipper.bytes_shipped


def copy_files_round(logs: Path, uri: str) -> float:
    from pyarrow import fs as pafs

    target = s3_filesystem(canonical_uri(uri))
    dest = uri.split("://", 1)[1].split("?", 1)[0]
    local = pafs.LocalFileSystem()
    t = time.perf_counter()
    for pdir in sorted(logs.iterdir()):
        for f in sorted(pdir.glob("*.log")):
            if f.stat().st_size:
                pafs.copy_files(str(f), f"{dest}/{pdir.name}/{f.name}", local, target)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="8 segments of 8 MiB, 3 rounds")
    ap.add_argument("--segments", type=int, default=None)
    ap.add_argument("--segment-mib", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS / "bridge_s3.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    segments = args.segments or (8 if args.quick else 16)
    segment_mib = args.segment_mib or (8 if args.quick else 16)
    rounds = args.rounds or (3 if args.quick else 5)
    work = Path(tempfile.mkdtemp(prefix="kafkad-bench-s3-"))
    port = _free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
    )
    result: dict[str, Any] = {"segments": segments, "segment_mib": segment_mib, "rounds": rounds}
    try:
        from pyarrow import fs as pafs

        deadline = time.monotonic() + 60
        while True:
            try:
                pafs.FileSystem.from_uri("s3://bench?allow_bucket_creation=true")[0].create_dir("bench")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        logs = work / "logs"
        records = build_logs(logs, segments, segment_mib)
        ship_s, copy_s, ratios = [], [], []
        size = 0
        for r in range(rounds):
            elapsed, size = ship_round(logs, work, f"s3://bench/ship-{r}")
            copied = copy_files_round(logs, f"s3://bench/copy-{r}")
            ship_s.append(size / elapsed / 1e6)
            copy_s.append(size / copied / 1e6)
            ratios.append(copied / elapsed)
            print(f"round {r}: shipper {ship_s[-1]:.1f} MB/s, copy_files {copy_s[-1]:.1f} MB/s", flush=True)
        result["shipping"] = {
            "bytes": size,
            "shipper_mb_per_s": _stats(ship_s),
            "copy_files_mb_per_s": _stats(copy_s),
            "ratio_shipper_vs_copy_files": _stats(ratios),
        }
        print(
            f"shipping {size / 1e6:.0f} MB: shipper {_fmt(_stats(ship_s))} MB/s, copy_files "
            f"{_fmt(_stats(copy_s))} MB/s, ratio {_fmt(_stats(ratios), 2)} (min / median / max)"
        )
        local_landing = work / "landing"
        local_landing.mkdir()
        Shipper(
            ShipperConfig(site="bench"),
            DirectorySegmentSource([logs]),
            FilesystemLanding(local_landing),
            LocalPositionStore(work / "positions-local"),
            clock=ManualClock(),
        ).run_once()
        spark = local_session("kafkad-bench-s3", args.cores, "1g")
        s3_rate, local_rate, ingest_ratios = [], [], []
        try:
            run_ingest(spark, str(local_landing), work / "warm-out")  # the session's first job
            for r in range(rounds):
                a = run_ingest(spark, "s3://bench/ship-0", work / f"out-s3-{r}")
                b = run_ingest(spark, str(local_landing), work / f"out-local-{r}")
                assert sum(t.records for t in a.topics) == records == sum(t.records for t in b.topics)
                s3_rate.append(records / a.timings_s["spark"])
                local_rate.append(records / b.timings_s["spark"])
                ingest_ratios.append(s3_rate[-1] / local_rate[-1])
                print(
                    f"round {r}: ingest from S3 {s3_rate[-1]:,.0f} rec/s, local {local_rate[-1]:,.0f} rec/s"
                )
        finally:
            spark.stop()
        result["ingest"] = {
            "records": records,
            "cores": args.cores,
            "s3_records_per_s": _stats(s3_rate),
            "local_records_per_s": _stats(local_rate),
            "ratio_s3_vs_local": _stats(ingest_ratios),
        }
        print(
            f"ingest {records} records: from S3 {_fmt(_stats(s3_rate), 0)} rec/s, local "
            f"{_fmt(_stats(local_rate), 0)} rec/s, ratio {_fmt(_stats(ingest_ratios), 2)}"
        )
        result["loadavg"] = os.getloadavg()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
