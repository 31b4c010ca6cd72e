"""The ingest ledger and staging area: what `kafkad-spark-ingest` has committed, and crash recovery.

Ledger (`<output>/_kafkad_ingest_ledger.json`, version 2): per stream `site/topic/partition`, the
merged offset ranges already in the Parquet output::

    {"version": 2, "streams": {"paris/sensors/0": [[0, 9999], [12000, 15999]], ...}}

Keyed by offsets, not by object names, so an object shipped twice or two overlapping objects of two
leaders add nothing the ledger already holds (see `plan.assign`).

Version 1 (before sites: `topic/partition/base` -> CRC per ingested segment, output partitioned
`topic=/date=`) is migrated on the first run that finds it: each entry becomes the range of its
version-1 manifest, still in the landing (`<landing>/<topic>/<partition>/<base>.manifest.json`), under
the legacy site name (`--legacy-site`); existing `topic=*` output directories move under
`site=<legacy site>/` (one rename each); then the version-2 ledger replaces the old one. A crash in
between leaves the version-1 ledger, and the re-run moves what is left. A staged run of version 1
(interrupted before the upgrade) is rolled forward first, in the old layout.

Staging: `<output>/_staging/<run>/` holds Spark's files until the intent file `_KAFKAD_RUN.json`
(written after Spark finished: run id and the ranges per stream) exists; `commit` then renames every
staged file into place, and writes the ledger strictly after the data.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkad.spark_bridge.landing import LandingStore
from kafkad.spark_bridge.manifest import Manifest, segment_stem
from kafkad.spark_bridge.plan import Range, StreamKey, merge
from kafkad.storage.checkpoints import fsync_dir, write_atomic

log = logging.getLogger("kafkad.spark_bridge.ingest")

LEDGER_FILE = "_kafkad_ingest_ledger.json"
STAGING_DIR = "_staging"
INTENT_FILE = "_KAFKAD_RUN.json"
LEDGER_VERSION = 2
# Fault injection for the crash tests: SIGKILL ourselves at a named step.
_CRASH_ENV = "KAFKAD_INGEST_CRASH_AT"

Ledger = dict[StreamKey, list[Range]]


def stream_id(key: StreamKey) -> str:
    return f"{key[0]}/{key[1]}/{key[2]}"


def parse_stream_id(text: str) -> StreamKey:
    site, topic, partition = text.split("/")
    return site, topic, int(partition)


def maybe_crash(step: str) -> None:
    if os.environ.get(_CRASH_ENV) == step:
        log.warning("crash injected at %s", step)
        os.kill(os.getpid(), signal.SIGKILL)


def _read_raw(output: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((output / LEDGER_FILE).read_text())
    except FileNotFoundError:
        return None
    return data


def read_ledger(output: Path) -> Ledger:
    """Stream -> merged ranges in the output; {} before the first run (version 2 only)."""
    raw = _read_raw(output)
    if raw is None:
        return {}
    if raw.get("version") != LEDGER_VERSION:
        raise ValueError(f"{output / LEDGER_FILE}: version {raw.get('version')}; run the ingest to migrate")
    return {parse_stream_id(k): [(int(a), int(b)) for a, b in v] for k, v in raw["streams"].items()}


def write_ledger(output: Path, ledger: Mapping[StreamKey, list[Range]]) -> None:
    streams = {stream_id(k): [list(r) for r in v] for k, v in sorted(ledger.items())}
    body = {"version": LEDGER_VERSION, "streams": streams}
    write_atomic(output / LEDGER_FILE, json.dumps(body, separators=(",", ":")).encode())


def add_ranges(ledger: Ledger, added: Mapping[StreamKey, list[Range]]) -> None:
    for key, ranges in added.items():
        ledger[key] = merge([*ledger.get(key, ()), *ranges])


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
        maybe_crash("mid-move")
    for d in parents:  # the renames must be durable before the ledger says they happened
        fsync_dir(d)
    return moved


def write_intent(stage: Path, run: str, added: Mapping[StreamKey, list[Range]]) -> None:
    body = {"run": run, "streams": {stream_id(k): [list(r) for r in v] for k, v in added.items()}}
    write_atomic(stage / INTENT_FILE, json.dumps(body, separators=(",", ":")).encode())


def commit(output: Path, stage: Path, ledger: Ledger) -> int:
    """Move a finished stage in, then ledger its ranges. Returns the number of streams ledgered."""
    intent = json.loads((stage / INTENT_FILE).read_text())
    _move_in(stage, output)
    maybe_crash("before-ledger")
    added = {parse_stream_id(k): [(int(a), int(b)) for a, b in v] for k, v in intent["streams"].items()}
    add_ranges(ledger, added)
    write_ledger(output, ledger)
    shutil.rmtree(stage)
    return len(added)


def _stages(output: Path) -> list[Path]:
    staging = output / STAGING_DIR
    return sorted(p for p in staging.iterdir() if p.is_dir()) if staging.is_dir() else []


def recover(output: Path, ledger: Ledger) -> int:
    """Roll forward complete staged runs, delete incomplete ones. Returns runs rolled forward."""
    rolled = 0
    for stage in _stages(output):
        if (stage / INTENT_FILE).exists():
            n = commit(output, stage, ledger)
            log.info("recovered run %s: %d streams committed", stage.name, n)
            rolled += 1
        else:
            log.info("discarding incomplete run %s", stage.name)
            shutil.rmtree(stage)
    return rolled


# --- version 1 ---------------------------------------------------------------------------------
def _recover_v1(output: Path, segments: dict[str, Any]) -> int:
    """Roll forward staged runs of a version-1 job (old layout, segment ids) before migrating."""
    rolled = 0
    for stage in _stages(output):
        intent_path = stage / INTENT_FILE
        if not intent_path.exists():
            continue  # discarded by `recover` later
        intent = json.loads(intent_path.read_text())
        if "segments" not in intent:
            continue
        _move_in(stage, output)
        for seg in intent["segments"]:
            segments[seg["id"]] = {"crc32c": seg["crc32c"], "run": intent["run"]}
        shutil.rmtree(stage)
        rolled += 1
    return rolled


def migrate_v1(output: Path, landing: LandingStore, legacy_site: str) -> int:
    """Turn a version-1 ledger and output layout into version 2 (see the module doc).

    Returns the version-1 runs rolled forward on the way (0 when there is nothing to migrate).
    """
    raw = _read_raw(output)
    if raw is None or raw.get("version") == LEDGER_VERSION:
        return 0
    segments: dict[str, Any] = raw["segments"]
    rolled = _recover_v1(output, segments)
    ledger: Ledger = {}
    for seg_id in segments:
        topic, partition, base = seg_id.rsplit("/", 2)
        name = segment_stem(None, topic, int(partition), int(base), -1) + ".manifest.json"
        data = landing.read_bytes(name)
        if data is None:
            log.warning("ledger migration: %s is no longer in the landing; its range is unknown", name)
            continue
        m = Manifest.from_json(data)
        if m.last_offset >= m.base_offset:
            add_ranges(ledger, {(legacy_site, m.topic, m.partition): [(m.base_offset, m.last_offset)]})
    site_dir = output / f"site={legacy_site}"
    moved = [p for p in sorted(output.glob("topic=*")) if p.is_dir()]
    if moved:
        site_dir.mkdir(exist_ok=True)
        for p in moved:
            os.replace(p, site_dir / p.name)
        fsync_dir(site_dir)
        fsync_dir(output)
    write_ledger(output, ledger)
    log.info(
        "migrated the version-1 ledger (%d segments, %d output dirs) to site %s",
        len(segments),
        len(moved),
        legacy_site,
    )
    return rolled
