"""Shared fixtures: one long-lived broker for the client tests, a fresh one for tests that kill it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess


@pytest.fixture(scope="session")
def session_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # num.partitions=3 so topics kcat auto-creates match the partition count the tests use.
    with BrokerProcess(tmp_path_factory.mktemp("kafkad-session"), {"num.partitions": "3"}) as b:
        yield b


@pytest.fixture()
def bootstrap(session_broker: BrokerProcess) -> str:
    assert session_broker.running, "the session broker died:\n" + session_broker.log_text()[-4000:]
    return session_broker.bootstrap


@pytest.fixture()
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "kafkad", {"num.partitions": "3"}) as b:
        yield b
