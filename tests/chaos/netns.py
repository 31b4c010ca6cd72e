"""Appliances on one machine: each broker in its own network namespace, partitions made with nftables.

Topology (all names carry a random tag; addresses in a random 10.214.N.0/24 only this module assigns):
- a switch namespace holding a Linux bridge;
- the host (root namespace: the test, its clients, ZooKeeper) joins the bridge through one veth with two
  addresses: `.1` for clients and `.2` for ZooKeeper (so "cut from ZooKeeper" and "cut from clients" are
  different rules);
- host i (a broker) gets a namespace, a veth into the bridge and address `.(10 + i)`; `exec_prefix(i)` runs a
  process inside it (`ip netns exec`, which execs in place: the pid is the process's own).
Nothing is routed or forwarded in the root namespace (no sysctl changed); traffic stays on the bridge.

Faults are nftables rules in the broker namespaces (table `inet chaos`: input/output chains dropping the
peer's address), so a partition cuts both directions from one side: `cut(i, addrs)`, `isolate(i)` from every
other appliance, `cut_zookeeper(i)`, `heal()` flushes them all. `close()` deletes every namespace and link.
"""

from __future__ import annotations

import os
import random
import subprocess
import uuid
from collections.abc import Iterable, Sequence
from types import TracebackType


def _run(*cmd: str, input_text: str | None = None) -> None:
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30, input=input_text)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")


def _unused_subnet() -> str:
    used = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=30
    ).stdout
    for _ in range(100):
        subnet = f"10.214.{random.randrange(1, 255)}"
        if f" {subnet}." not in used:
            return subnet
    raise AssertionError("no free 10.214.N.0/24 for a chaos network")


class ChaosNet:
    def __init__(self, hosts: Sequence[int], subnet: str | None = None) -> None:
        if os.geteuid() != 0:
            raise AssertionError("network namespaces need root (ip netns, veth, nft)")
        self.tag = uuid.uuid4().hex[:6]
        self.subnet = subnet or _unused_subnet()
        self.hosts = list(hosts)
        self.switch = f"kc-sw-{self.tag}"
        self.host_if = f"kch{self.tag}"
        self._cut: dict[int, set[str]] = {}
        self._created: list[str] = []  # namespaces, deleted at close
        self._links: list[str] = []  # root-namespace links, deleted at close

    # --- addresses ---------------------------------------------------------------------------------
    @property
    def client_addr(self) -> str:
        return f"{self.subnet}.1"

    @property
    def zk_addr(self) -> str:
        return f"{self.subnet}.2"

    def addr(self, host: int) -> str:
        return f"{self.subnet}.{10 + host}"

    def ns(self, host: int) -> str:
        return f"kc-{self.tag}-{host}"

    def exec_prefix(self, host: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host)]

    # --- lifecycle ---------------------------------------------------------------------------------
    def open(self) -> ChaosNet:
        try:
            _run("ip", "netns", "add", self.switch)
            self._created.append(self.switch)
            _run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", self.switch, "link", "set", "br0", "up")
            self._plug(self.host_if, None)
            _run("ip", "addr", "add", f"{self.client_addr}/24", "dev", self.host_if)
            _run("ip", "addr", "add", f"{self.zk_addr}/24", "dev", self.host_if)
            _run("ip", "link", "set", self.host_if, "up")
            for h in self.hosts:
                ns = self.ns(h)
                _run("ip", "netns", "add", ns)
                self._created.append(ns)
                _run("ip", "-n", ns, "link", "set", "lo", "up")
                self._plug(f"kcb{self.tag}{h}", ns)
                _run("ip", "-n", ns, "addr", "add", f"{self.addr(h)}/24", "dev", f"kcb{self.tag}{h}")
                _run("ip", "-n", ns, "link", "set", f"kcb{self.tag}{h}", "up")
                table = "table inet chaos {\n chain input { type filter hook input priority 0; }\n"
                table += " chain output { type filter hook output priority 0; }\n}\n"
                _run("ip", "netns", "exec", ns, "nft", "-f", "-", input_text=table)
        except BaseException:
            self.close()
            raise
        return self

    def _plug(self, name: str, ns: str | None) -> None:
        """A veth `name` (moved into `ns`, or left in the root namespace) whose peer joins the bridge."""
        peer = f"kcs{self.tag}{len(self._links)}"
        _run("ip", "link", "add", name, "type", "veth", "peer", "name", peer)
        self._links.append(name if ns is None else peer)
        _run("ip", "link", "set", peer, "netns", self.switch)
        _run("ip", "-n", self.switch, "link", "set", peer, "master", "br0")
        _run("ip", "-n", self.switch, "link", "set", peer, "up")
        if ns is not None:
            _run("ip", "link", "set", name, "netns", ns)

    def close(self) -> None:
        for link in self._links:
            subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=30)
        for ns in reversed(self._created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._links.clear()
        self._created.clear()

    def __enter__(self) -> ChaosNet:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- faults ------------------------------------------------------------------------------------
    def cut(self, host: int, addrs: Iterable[str]) -> None:
        """Drop every packet between `host` and `addrs` (both directions, rules in host's namespace)."""
        new = set(addrs) - self._cut.setdefault(host, set())
        rules = []
        for a in sorted(new):
            rules.append(f"add rule inet chaos input ip saddr {a} drop")
            rules.append(f"add rule inet chaos output ip daddr {a} drop")
        if rules:
            _run("ip", "netns", "exec", self.ns(host), "nft", "-f", "-", input_text="\n".join(rules) + "\n")
        self._cut[host] |= new

    def isolate(self, host: int, *, from_zookeeper: bool = False, from_clients: bool = False) -> None:
        """Cut `host` from every other appliance (and optionally from ZooKeeper / the clients)."""
        addrs = [self.addr(h) for h in self.hosts if h != host]
        if from_zookeeper:
            addrs.append(self.zk_addr)
        if from_clients:
            addrs.append(self.client_addr)
        self.cut(host, addrs)

    def cut_zookeeper(self, host: int) -> None:
        self.cut(host, [self.zk_addr])

    def split(self, side: Iterable[int]) -> None:
        """Two sides: `side` and the rest (ZooKeeper and clients stay reachable from both)."""
        a = set(side)
        for h in self.hosts:
            other = [self.addr(x) for x in self.hosts if (x in a) != (h in a)]
            self.cut(h, other)

    def heal(self) -> None:
        for h in list(self._cut):
            _run("ip", "netns", "exec", self.ns(h), "nft", "flush", "chain", "inet", "chaos", "input")
            _run("ip", "netns", "exec", self.ns(h), "nft", "flush", "chain", "inet", "chaos", "output")
        self._cut.clear()

    def cuts(self) -> dict[int, set[str]]:
        return {h: set(a) for h, a in self._cut.items() if a}
