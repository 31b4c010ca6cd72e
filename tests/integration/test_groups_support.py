"""Shared pieces of the consumer-group integration tests: a kafkad process and group inspection.

`GroupBroker` runs a real kafkad on a free loopback port with a short initial rebalance delay;
`group_assignment` asks the broker (DescribeGroups over the wire) who owns which partition.
(Kept here until the shared fixture in tests/integration/conftest.py exists; it holds no tests.)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkad.protocol import ApiKey
from kafkad.tools.client import KafkaClient
from kafkad.tools.consumer_groups import decode_assignment

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class GroupBroker:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / "kafkad.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [
            sys.executable,
            "-m",
            "kafkad.daemon.main",
            "--override",
            f"log.dirs={self.data_dir / 'logs'}",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override",
            "group.initial.rebalance.delay.ms=300",
            "--override",
            "offsets.topic.num.partitions=5",
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafkad exited: {self.log_path.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("kafkad did not start listening within 20 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        self.proc = None

    def kill9(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[GroupBroker]:
    broker = GroupBroker(tmp_path)
    broker.start()
    try:
        yield broker
    finally:
        if broker.proc is not None:
            broker.kill9()


def group_assignment(bootstrap: str, group: str) -> tuple[str, dict[str, list[tuple[str, int]]]]:
    """(state, member_id -> assigned partitions) as the coordinator reports them."""
    with KafkaClient(bootstrap) as client:
        body = client.send(ApiKey.DESCRIBE_GROUPS, {"groups": [group]})
    g = body["groups"][0]
    members = {m["member_id"]: decode_assignment(m["member_assignment"]) for m in g["members"]}
    return g["group_state"], members


def wait_for(predicate: object, timeout_s: float, what: str) -> None:
    """Poll `predicate()` (a callable returning truthy) until true, or fail naming `what`."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
