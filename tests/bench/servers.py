"""The processes a benchmark measures: kafkad, the do-nothing sink, the raw sendfile server.

How it works: each server is a child process on 127.0.0.1 and a free port; `Target` is what a scenario
sees (bootstrap address, pid, name). `CpuMeter` reads the process's user+system CPU seconds with psutil
at the start and end of a measured window, so each figure is "CPU spent by this server while it did
exactly that work". kafkad is started through tests/integration/broker_process.BrokerProcess, the same
harness the integration tests use.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.integration.broker_process import BrokerProcess, free_port

BROKER_DEFAULTS: Mapping[str, str] = {
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    "log.segment.bytes": str(1 << 30),
}


@dataclass(frozen=True, slots=True)
class Target:
    """A server under test: its name in reports, its bootstrap address and its pid."""

    name: str
    port: int
    pid: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        t = psutil.Process(self.pid).cpu_times()
        return float(t.user + t.system)

    def rss_bytes(self) -> int:
        return int(psutil.Process(self.pid).memory_info().rss)


class CpuMeter:
    """CPU seconds a process spends between start() and stop()."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._t0 = 0.0
        self.seconds = 0.0

    def start(self) -> None:
        self._t0 = self.target.cpu_seconds()

    def stop(self) -> None:
        self.seconds = self.target.cpu_seconds() - self._t0


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {port} after {timeout_s}s")


class ChildServer:
    """A `python -m <module> --port P ...` child (the sink, the sendfile server)."""

    def __init__(self, name: str, module: str, args: list[str], log_path: Path) -> None:
        self.name = name
        self.port = free_port()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - lives as long as the child
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "--port", str(self.port), *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_port(self.port, self.proc)

    @property
    def target(self) -> Target:
        return Target(self.name, self.port, self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def start_sink(work: Path) -> ChildServer:
    return ChildServer("sink", "tests.bench.sink", ["--file", str(work / "sink.bin")], work / "sink.log")


def start_broker(work: Path, overrides: Mapping[str, str] | None = None) -> BrokerProcess:
    broker = BrokerProcess(work / "kafkad", {**BROKER_DEFAULTS, **(overrides or {})}, startup_timeout_s=120)
    broker.start()
    return broker


def broker_target(broker: BrokerProcess) -> Target:
    assert broker.proc is not None
    return Target("kafkad", broker.port, broker.proc.pid)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create a topic on kafkad (raw clients do not trigger auto-creation); an existing one is fine."""
    import confluent_kafka as ck
    import confluent_kafka.admin as cka

    admin = cka.AdminClient({"bootstrap.servers": bootstrap})
    new = cka.NewTopic(topic, num_partitions=partitions, replication_factor=1)  # type: ignore[attr-defined]
    fut = admin.create_topics([new])[topic]
    try:
        fut.result(120)
    except ck.KafkaException as e:
        if e.args[0].code() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
            raise
