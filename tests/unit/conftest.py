"""Fixtures shared by unit tests of several layers."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Files to `chattr +i`; made mutable again at teardown (or the tmp dir cannot be removed)."""
    paths: list[Path] = []
    yield paths
    for p in paths:
        subprocess.run(["chattr", "-i", str(p)], check=False)
