"""Crashes and outages: shipper SIGKILLed mid-copy, ingest interrupted at every step, landing gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kafkad.spark_bridge import ingest, ledger
from kafkad.spark_bridge.ingest import STAGING_DIR, read_ledger, run_ingest
from kafkad.spark_bridge.manifest import Manifest
from tests.spark.conftest import spark_env
from tests.spark.helpers import SITE, expected_rows, make_shipper, parquet_rows, write_logs

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]


class Interrupted(Exception):
    pass


def _landed(landing: Path) -> dict[str, Path]:
    """Visible (non-hidden) files of the landing area."""
    return {
        str(p.relative_to(landing)): p
        for p in landing.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def _check_landing_consistent(landing: Path) -> None:
    """Every visible .log is complete: it has a manifest and matches its size and CRC."""
    from crc32c import crc32c

    files = _landed(landing)
    for name, path in files.items():
        if name.endswith(".log"):
            manifest = files.get(name[: -len(".log")] + ".manifest.json")
            if manifest is None:
                continue  # data landed, manifest not yet: invisible to readers, rewritten on retry
            m = Manifest.from_json(manifest.read_bytes())
            data = path.read_bytes()
            assert len(data) == m.size and crc32c(data) == m.crc32c, name
        else:
            assert (landing / (name[: -len(".manifest.json")] + ".log")).exists(), name


def test_shipper_sigkilled_mid_copy_then_restart_ships_everything_once(tmp_path: Path, spark: Any) -> None:
    logs, landing, output = tmp_path / "logs", tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    expected = expected_rows(write_logs(logs))
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from kafkad.spark_bridge.landing import FilesystemLanding
        from kafkad.spark_bridge.segment_source import DirectorySegmentSource
        from kafkad.spark_bridge.position import LocalPositionStore
        from kafkad.spark_bridge.shipper import Shipper, ShipperConfig
        calls = []
        def hook(seg, copied):
            calls.append(copied)
            if len(calls) == 9:  # a few segments in, in the middle of one
                os.kill(os.getpid(), signal.SIGKILL)
        logs = Path({str(logs)!r})
        Shipper(ShipperConfig(site={SITE!r}, copy_chunk_bytes=4096), DirectorySegmentSource([logs]),
                FilesystemLanding({str(landing)!r}), LocalPositionStore.in_dir(logs),
                copy_hook=hook).run_once()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=spark_env(), timeout=300)
    assert proc.returncode == -signal.SIGKILL
    before = _landed(landing)
    hidden = [p for p in landing.rglob(".*") if p.is_file()]
    assert hidden, "the interrupted copy should have left only a hidden temp file"
    _check_landing_consistent(landing)
    complete = {n for n in before if n.endswith(".manifest.json")}
    assert 0 < len(complete) < 15

    shipper = make_shipper(logs, landing)
    results = shipper.run_once()
    copied = [r for r in results if r.copied]
    assert len(copied) == 15 - len(complete)  # nothing that fully landed is copied again
    assert shipper.run_once() == []
    _check_landing_consistent(landing)
    run_ingest(spark, str(landing), output)
    assert parquet_rows(output) == expected


@pytest.mark.parametrize("step", ["after-write", "before-ledger"])  # mid-move: the SIGKILL test below
def test_ingest_interrupted_then_rerun_gives_same_tables(
    tmp_path: Path, spark: Any, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs, landing, output = tmp_path / "logs", tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    expected = expected_rows(write_logs(logs))
    make_shipper(logs, landing).run_once()

    def crash(at: str) -> None:
        if at == step:
            raise Interrupted(at)

    monkeypatch.setattr(ingest, "maybe_crash", crash)
    monkeypatch.setattr(ledger, "maybe_crash", crash)
    with pytest.raises(Interrupted):
        run_ingest(spark, str(landing), output)
    assert read_ledger(output) == {}  # the ledger is only ever written after the data
    monkeypatch.undo()

    summary = run_ingest(spark, str(landing), output)
    rolled_forward = step in ("after-intent", "mid-move", "before-ledger")
    assert summary.recovered_runs == (1 if rolled_forward else 0)
    assert parquet_rows(output) == expected
    assert len(read_ledger(output)) == 5
    assert not any((output / STAGING_DIR).iterdir())


@pytest.mark.timeout(1200)  # a Spark subprocess of its own (up to 900 s on a loaded machine), then a rerun
def test_ingest_sigkilled_subprocess_then_rerun(tmp_path: Path, spark: Any) -> None:
    logs, landing, output = tmp_path / "logs", tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    expected = expected_rows(write_logs(logs))
    make_shipper(logs, landing).run_once()
    env = spark_env()
    env["KAFKAD_INGEST_CRASH_AT"] = "mid-move"
    cmd = [
        sys.executable,
        "-m",
        "kafkad.spark_bridge.ingest",
        "--landing",
        str(landing),
        "--output",
        str(output),
    ]
    proc = subprocess.run([*cmd, "--master", "local[1]"], cwd=REPO, env=env, timeout=900, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert read_ledger(output) == {}
    moved = [p for p in output.rglob("*.parquet") if STAGING_DIR not in p.parts]
    assert len(moved) == 1  # killed right after the first rename

    summary = run_ingest(spark, str(landing), output)
    assert summary.recovered_runs == 1 and summary.topics == ()
    assert parquet_rows(output) == expected


def test_landing_gone_for_a_while_delays_and_loses_nothing(tmp_path: Path, spark: Any) -> None:
    logs, landing, output = tmp_path / "logs", tmp_path / "landing", tmp_path / "out"
    expected = expected_rows(write_logs(logs))
    shipper = make_shipper(logs, landing)  # landing dir does not exist yet (share unmounted)
    waits: list[float] = []

    def sleep(seconds: float) -> bool:
        waits.append(seconds)
        if len(waits) == 5:
            landing.mkdir()
        return True

    shipper._sleep = sleep
    results = shipper.run_once()
    assert len(waits) == 5 and waits == sorted(waits)  # exponential backoff while unreachable
    assert len(results) == 15 and all(r.copied for r in results)
    assert os.path.isdir(landing)
    run_ingest(spark, str(landing), output)
    assert parquet_rows(output) == expected
