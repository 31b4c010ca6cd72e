"""`kafkad-spark-ingest` refuses a landing that is not there instead of reporting "nothing new"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkad.spark_bridge.ingest import run_ingest

REPO = Path(__file__).resolve().parents[3]


def test_missing_landing_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    missing, output = tmp_path / "no-such-share", tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkad.spark_bridge.ingest",
            "--landing",
            str(missing),
            "--output",
            str(output),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(missing) in lines[0] and "missing" in lines[0]
    assert proc.stdout == ""
    assert not output.exists()  # failed before Spark started or anything was written


def test_missing_landing_is_an_error_for_run_ingest_too(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run_ingest(None, str(tmp_path / "gone"), tmp_path / "out")  # fails before Spark is touched
    assert not (tmp_path / "out").exists()
