"""Fixtures for cluster tests: a standalone ZooKeeper, a 3-node ensemble, and a KafkadCluster factory.

Every fixture cleans up whatever the test did to it (killed, paused, half-started nodes included).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperEnsemble, ZooKeeperServer


@pytest.fixture()
def immutable() -> Iterator[list[Path]]:
    """Directories a test made immutable (`chattr +i`, an I/O error on creating files there): undone."""
    paths: list[Path] = []
    yield paths
    for p in paths:
        subprocess.run(["chattr", "-i", str(p)], check=False)


@pytest.fixture()
def zk_server(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path / "zk") as zk:
        yield zk


@pytest.fixture()
def zk_ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(tmp_path / "zk-ensemble", 3) as ens:
        yield ens


@pytest.fixture(params=["zk_server", "zk_ensemble"])
def zk_any(request: pytest.FixtureRequest) -> Any:
    """A standalone ZooKeeper or a 3-node ensemble; set up before (so torn down after) the cluster."""
    return request.getfixturevalue(request.param)


@pytest.fixture()
def kafkad_cluster(tmp_path: Path) -> Iterator[Callable[..., KafkadCluster]]:
    """make(zk_connect, size=3, **kwargs) -> a started KafkadCluster (own chroot); all stopped at teardown,
    then their logs checked (an unexpected ERROR or traceback fails the test: KafkadCluster.check_logs)."""
    made: list[KafkadCluster] = []

    def make(zk_connect: str, size: int = 3, **kwargs: Any) -> KafkadCluster:
        kwargs.setdefault("chroot", f"/kafkad-{uuid.uuid4().hex[:8]}")
        c = KafkadCluster(tmp_path / f"cluster{len(made)}", zk_connect, size, **kwargs)
        made.append(c)
        c.start()
        return c

    yield make
    for c in made:
        c.stop()
    for c in made:
        c.check_logs()
