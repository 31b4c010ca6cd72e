"""The chaos network itself: namespaces on one bridge reach each other, the host and ZooKeeper's address;
nftables cuts make them unreachable both ways and heal() restores them; a kafkad inside a namespace serves
the host's clients until it is isolated; close() leaves no namespace or link behind."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chaos.netns import ChaosNet
from tests.cluster.cluster import wait_until
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration.broker_process import BrokerProcess

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]


def ping(net: ChaosNet, host: int, addr: str) -> bool:
    r = subprocess.run(
        [*net.exec_prefix(host), "ping", "-c", "1", "-W", "1", addr], capture_output=True, timeout=10
    )
    return r.returncode == 0


def tcp_from(net: ChaosNet, host: int, addr: str, port: int) -> bool:
    code = f"import socket; socket.create_connection(({addr!r}, {port}), timeout=1).close()"
    return (
        subprocess.run(
            [*net.exec_prefix(host), sys.executable, "-c", code], capture_output=True, timeout=20
        ).returncode
        == 0
    )


def tcp(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=1):
            return True
    except OSError:
        return False


def test_reachability_cuts_and_heal(tmp_path: Path) -> None:
    with ChaosNet([1, 2, 3]) as net, ZooKeeperServer(tmp_path / "zk", host=net.zk_addr) as zk:
        zk_port = zk.node.client_port
        assert wait_until(lambda: ping(net, 1, net.addr(2)), 20, "ns1 -> ns2")
        assert ping(net, 3, net.client_addr) and tcp_from(net, 1, net.zk_addr, zk_port)
        net.isolate(1)  # from brokers 2 and 3 only
        assert not ping(net, 1, net.addr(2)) and not ping(net, 3, net.addr(1))
        assert (
            ping(net, 2, net.addr(3))
            and ping(net, 1, net.client_addr)
            and tcp_from(net, 1, net.zk_addr, zk_port)
        )
        net.cut_zookeeper(2)
        assert not tcp_from(net, 2, net.zk_addr, zk_port) and ping(net, 2, net.addr(3))
        assert net.cuts().keys() == {1, 2}
        net.heal()
        assert (
            ping(net, 1, net.addr(2)) and ping(net, 3, net.addr(1)) and tcp_from(net, 2, net.zk_addr, zk_port)
        )
        net.split([3])
        assert not ping(net, 3, net.addr(1)) and not ping(net, 2, net.addr(3)) and ping(net, 1, net.addr(2))
        assert tcp_from(net, 3, net.zk_addr, zk_port)
        net.heal()
        names = [net.ns(h) for h in (1, 2, 3)] + [net.switch]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    assert not any(n in listed for n in names), listed
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=10).stdout
    assert net.host_if not in links


def test_broker_in_namespace_serves_until_isolated(tmp_path: Path) -> None:
    with ChaosNet([1]) as net:
        b = BrokerProcess(tmp_path / "b", host=net.addr(1), port=9092, command_prefix=net.exec_prefix(1))
        with b:
            assert tcp(net.addr(1), 9092)
            net.isolate(1, from_clients=True)
            assert not tcp(net.addr(1), 9092)
            net.heal()
            assert tcp(net.addr(1), 9092)
            b.kill9()
            b.start()  # restarts inside its namespace on the same address
            assert tcp(net.addr(1), 9092)
