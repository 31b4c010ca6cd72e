"""DHCP-style renumbering: kafkad listening on `PLAINTEXT://<interface>:port` follows the new address live.

The test builds its own network namespace and veth pair (unique names per run, addresses in a random
10.213.N.0/24 that only this test assigns), runs kafkad inside the namespace with `ip netns exec`, reaches
it from the host end of the veth, then swaps the inside address (ip addr del + add). Needs root.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.clients import CLIENTS, check_roundtrip, make_records

pytestmark = pytest.mark.system

PORT = 9092  # the namespace is ours: any port is free in it
WAIT_S = 120.0  # generous bound on each wait: a loaded machine is slow, a broken rebind never gets there


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass(frozen=True, slots=True)
class Netns:
    name: str
    host_if: str
    inside_if: str
    subnet: str  # "10.213.N"


@pytest.fixture()
def netns() -> Iterator[Netns]:
    if os.geteuid() != 0:
        pytest.fail("test_netns_renumber needs root (ip netns, veth)")
    tag = uuid.uuid4().hex[:6]
    ns = Netns(f"kafkad-t-{tag}", f"kdh{tag}", f"kdi{tag}", f"10.213.{random.randrange(256)}")
    try:
        _ip("netns", "add", ns.name)
        _ip("link", "add", ns.host_if, "type", "veth", "peer", "name", ns.inside_if)
        _ip("link", "set", ns.inside_if, "netns", ns.name)
        _ip("addr", "add", f"{ns.subnet}.1/24", "dev", ns.host_if)
        _ip("link", "set", ns.host_if, "up")
        _ip("-n", ns.name, "link", "set", "lo", "up")
        _ip("-n", ns.name, "addr", "add", f"{ns.subnet}.2/24", "dev", ns.inside_if)
        _ip("-n", ns.name, "link", "set", ns.inside_if, "up")
        yield ns
    finally:
        subprocess.run(["ip", "link", "del", ns.host_if], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", ns.name], capture_output=True, timeout=30)


def _connectable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.3):
            return True
    except OSError:
        return False


def _wait(what: str, cond: Callable[[], bool], timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not within {timeout_s}s; kafkad log:\n{log.read_text()[-4000:]}")


def _metadata_broker(bootstrap: str) -> tuple[str, int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=60)
    (b,) = md.brokers.values()
    return str(b.host), int(b.port)


class NetnsBroker:
    """kafkad run inside the namespace with `ip netns exec` (which execs it in place: proc.pid is kafkad)."""

    def __init__(self, ns: Netns, tmp_path: Path, properties: str) -> None:
        self.ns = ns
        self.cfg = tmp_path / "server.properties"
        self.cfg.write_text(f"{properties}\nlog.dirs={tmp_path / 'data'}\nnum.partitions=1\n")
        self.log = tmp_path / "kafkad.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> NetnsBroker:
        cmd = ["ip", "netns", "exec", self.ns.name, sys.executable, "-m", "kafkad.service.main"]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [*cmd, "--config", str(self.cfg)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        proc = self.proc

        def started() -> bool:
            return " started: " in self.text() or proc.poll() is not None

        _wait("kafkad started", started, WAIT_S, self.log)
        assert proc.poll() is None, self.text()
        return self

    def text(self) -> str:
        return self.log.read_text()

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        if exc[0] is None:
            assert self.proc.returncode == 0, self.text()[-4000:]
            assert "shut down cleanly" in self.text()


def _renumber(ns: Netns, old: str, new: str) -> None:
    """What a DHCP client does when the lease changes: the old address goes, the new one comes."""
    _ip("-n", ns.name, "addr", "del", f"{old}/24", "dev", ns.inside_if)
    _ip("-n", ns.name, "addr", "add", f"{new}/24", "dev", ns.inside_if)


def test_listener_follows_interface_renumbering(netns: Netns, tmp_path: Path) -> None:
    old, new = f"{netns.subnet}.2", f"{netns.subnet}.3"
    with NetnsBroker(netns, tmp_path, f"listeners=PLAINTEXT://{netns.inside_if}:{PORT}") as kafkad:
        assert kafkad.proc is not None
        _wait("kafkad serving on the interface address", lambda: _connectable(old, PORT), WAIT_S, kafkad.log)
        assert f"interface listeners: {netns.inside_if}={old}" in kafkad.text()
        assert _metadata_broker(f"{old}:{PORT}") == (old, PORT)

        confluent = CLIENTS["confluent"]
        ts = int(time.time() * 1000) - 100_000
        first = make_records(2_000, 1, ts)
        confluent.create_topic(f"{old}:{PORT}", "renumber", 1)
        confluent.produce(f"{old}:{PORT}", "renumber", first, "lz4")

        t0 = time.monotonic()
        _renumber(netns, old, new)
        _wait("kafkad listening on the new address", lambda: _connectable(new, PORT), WAIT_S, kafkad.log)
        print(f"renumber -> accepting on the new address in {(time.monotonic() - t0) * 1000:.0f} ms")

        assert kafkad.proc.poll() is None, "kafkad exited"
        text = kafkad.text()
        assert text.count(" started: ") == 1, "kafkad restarted instead of rebinding"
        assert f"interface address changed: {netns.inside_if}={new}" in text
        pids = subprocess.run(
            ["ip", "netns", "pids", netns.name], capture_output=True, text=True, check=True
        ).stdout.split()
        assert str(kafkad.proc.pid) in pids

        # A fresh client bootstrapped at the new address is told the new address.
        assert _metadata_broker(f"{new}:{PORT}") == (new, PORT)
        second = make_records(2_000, 1, ts + 2_000)
        confluent.produce(f"{new}:{PORT}", "renumber", second, "zstd")
        got = confluent.consume(f"{new}:{PORT}", "renumber", 1, expect=4_000)
        check_roundtrip(first + second, got)
        assert [g.offset for g in got] == list(range(4_000))


def test_advertised_interface_on_a_wildcard_listener(netns: Netns, tmp_path: Path) -> None:
    """Bound to 0.0.0.0 (no rebind needed); only Metadata's advertised address follows the interface."""
    old, new = f"{netns.subnet}.2", f"{netns.subnet}.4"
    props = f"listeners=PLAINTEXT://0.0.0.0:{PORT}\nadvertised.listeners=PLAINTEXT://{netns.inside_if}:{PORT}"
    with NetnsBroker(netns, tmp_path, props) as kafkad:
        _wait("kafkad serving", lambda: _connectable(old, PORT), WAIT_S, kafkad.log)
        assert _metadata_broker(f"{old}:{PORT}") == (old, PORT)
        _renumber(netns, old, new)
        _wait("the change seen", lambda: "interface address changed" in kafkad.text(), WAIT_S, kafkad.log)
        assert _metadata_broker(f"{new}:{PORT}") == (new, PORT)


def test_interface_without_address_at_start(netns: Netns, tmp_path: Path) -> None:
    """Booted before DHCP answered: kafkad starts, and listens as soon as the address arrives."""
    addr = f"{netns.subnet}.5"
    _ip("-n", netns.name, "addr", "flush", "dev", netns.inside_if)
    with NetnsBroker(netns, tmp_path, f"listeners=PLAINTEXT://{netns.inside_if}:{PORT}") as kafkad:
        assert "the interface has no IPv4 address yet" in kafkad.text()
        _ip("-n", netns.name, "addr", "add", f"{addr}/24", "dev", netns.inside_if)
        _wait("kafkad listening once the address came", lambda: _connectable(addr, PORT), WAIT_S, kafkad.log)
        assert _metadata_broker(f"{addr}:{PORT}") == (addr, PORT)


def test_rapid_renumbering_settles_on_the_last_address(netns: Netns, tmp_path: Path) -> None:
    """20 leases back to back with no pause: no event is lost, kafkad ends on the last address."""
    addrs = [f"{netns.subnet}.{10 + i}" for i in range(20)]
    with NetnsBroker(netns, tmp_path, f"listeners=PLAINTEXT://{netns.inside_if}:{PORT}") as kafkad:
        assert kafkad.proc is not None
        previous = f"{netns.subnet}.2"
        batch = []
        for addr in addrs:
            batch += [
                f"addr del {previous}/24 dev {netns.inside_if}",
                f"addr add {addr}/24 dev {netns.inside_if}",
            ]
            previous = addr
        subprocess.run(
            ["ip", "-n", netns.name, "-batch", "-"],
            input="\n".join(batch) + "\n",
            text=True,
            check=True,
            timeout=30,
        )
        last = addrs[-1]
        _wait("kafkad on the last address", lambda: _connectable(last, PORT), WAIT_S, kafkad.log)
        assert _metadata_broker(f"{last}:{PORT}") == (last, PORT)
        assert kafkad.proc.poll() is None and kafkad.text().count(" started: ") == 1
