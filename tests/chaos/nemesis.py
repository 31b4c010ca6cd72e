"""Nemeses: faults a chaos schedule injects and heals (Jepsen's term).

Each nemesis has a `name`, `inject(rng) -> target` (what it hit, e.g. "broker 2") and `heal()`. Targets are
picked through a `Brokers` view, implemented by tests.cluster.cluster.KafkadCluster (ids 1..N; leaders and
controller read from ZooKeeper) and by `SingleBroker` (one standalone kafkad, id 0, leader of everything),
so every process fault can be proven on a standalone broker before the cluster exists.

- ProcessFault: kill -9 / SIGTERM (clean shutdown) then restart, or SIGSTOP then SIGCONT, of a partition's
  leader, a follower, the controller or any broker.
- ZooKeeperLoss: kill -9 of an ensemble follower or of the ensemble's leader, restarted at heal.
- DiskFull: fills the tmpfs holding a broker's log dir with a ballast file; heal deletes it.
- DamagedSegment: SIGTERM, append bytes past the last batch of the newest segment (a file system that kept
  the clean-shutdown marker but not the data), start again; the broker must come up.
- Network partitions live in netns.py (they need the namespaces).
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from tests.cluster.zookeeper import ZooKeeperEnsemble
from tests.integration.broker_process import BrokerProcess


class Brokers(Protocol):
    @property
    def ids(self) -> list[int]: ...
    def broker(self, bid: int) -> BrokerProcess: ...
    def kill9(self, bid: int) -> None: ...
    def sigterm(self, bid: int, timeout_s: float = 60.0) -> int: ...
    def sigstop(self, bid: int) -> None: ...
    def sigcont(self, bid: int) -> None: ...
    def restart(self, bid: int) -> None: ...
    def leader_of(self, topic: str, partition: int) -> int | None: ...
    def replicas_of(self, topic: str, partition: int) -> list[int]: ...
    def controller_id(self) -> int | None: ...


class SingleBroker:
    """A standalone kafkad seen as a one-broker cluster (id 0): leader and 'controller' of everything."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.b = broker

    @property
    def ids(self) -> list[int]:
        return [0]

    def broker(self, bid: int) -> BrokerProcess:
        assert bid == 0
        return self.b

    def kill9(self, bid: int) -> None:
        self.b.kill9()

    def sigterm(self, bid: int, timeout_s: float = 60.0) -> int:
        return self.b.stop(timeout_s=timeout_s)

    def sigstop(self, bid: int) -> None:
        self.b.sigstop()

    def sigcont(self, bid: int) -> None:
        self.b.sigcont()

    def restart(self, bid: int) -> None:
        if self.b.running:
            self.b.stop()
        else:
            self.b.kill9()
        self.b.start()

    def leader_of(self, topic: str, partition: int) -> int | None:
        return 0

    def replicas_of(self, topic: str, partition: int) -> list[int]:
        return [0]

    def controller_id(self) -> int | None:
        return 0


class Nemesis(Protocol):
    name: str

    def inject(self, rng: random.Random) -> str: ...
    def heal(self) -> None: ...


PICKS = ("leader", "follower", "controller", "any")


def pick_broker(brokers: Brokers, pick: str, topic: str, partitions: int, rng: random.Random) -> int:
    running = [b for b in brokers.ids if brokers.broker(b).running]
    if pick == "controller":
        c = brokers.controller_id()
        if c is None or c not in running:
            raise AssertionError(f"no running controller to hit (controller={c})")
        return c
    p = rng.randrange(partitions)
    leader = brokers.leader_of(topic, p)
    if pick == "leader":
        if leader is None or leader not in running:
            raise AssertionError(f"partition {p} of {topic} has no running leader ({leader})")
        return leader
    if pick == "follower":
        followers = [r for r in brokers.replicas_of(topic, p) if r != leader and r in running]
        if not followers:
            raise AssertionError(f"partition {p} of {topic} has no running follower")
        return rng.choice(followers)
    assert pick == "any", pick
    return rng.choice(running)


class ProcessFault:
    """kill9 / sigterm (restarted at heal) or sigstop (SIGCONT at heal) of a picked broker."""

    ACTIONS = ("kill9", "sigterm", "sigstop")

    def __init__(self, brokers: Brokers, action: str, pick: str, topic: str, partitions: int) -> None:
        assert action in self.ACTIONS and pick in PICKS
        self.brokers = brokers
        self.action = action
        self.pick = pick
        self.topic = topic
        self.partitions = partitions
        self.name = f"{action}-{pick}"
        self.min_hold_s = 0.0  # the schedule holds the fault at least this long (SIGSTOP past a session)
        self.target: int | None = None
        self.exit_codes: list[int] = []

    def inject(self, rng: random.Random) -> str:
        t = pick_broker(self.brokers, self.pick, self.topic, self.partitions, rng)
        self.target = t
        if self.action == "kill9":
            self.brokers.kill9(t)
        elif self.action == "sigterm":
            self.exit_codes.append(self.brokers.sigterm(t))
        else:
            self.brokers.sigstop(t)
        return f"broker {t}"

    def heal(self) -> None:
        t, self.target = self.target, None
        assert t is not None, "heal without inject"
        if self.action == "sigstop":
            self.brokers.sigcont(t)
        else:
            self.brokers.restart(t)


class ZooKeeperLoss:
    """kill -9 of one ensemble member (`leader=True`: the ensemble's leader); restarted at heal."""

    def __init__(self, ensemble: ZooKeeperEnsemble, *, leader: bool) -> None:
        self.ens = ensemble
        self.leader = leader
        self.name = "zk-leader-loss" if leader else "zk-member-loss"
        self.target: int | None = None

    def inject(self, rng: random.Random) -> str:
        ld = self.ens.wait_leader(timeout_s=30)
        t = ld if self.leader else rng.choice([i for i in self.ens.nodes if i != ld])
        self.ens.node(t).kill9()
        self.target = t
        return f"zookeeper {t}"

    def heal(self) -> None:
        t, self.target = self.target, None
        assert t is not None, "heal without inject"
        self.ens.node(t).start()
        self.ens.wait_quorum(timeout_s=60)


@contextlib.contextmanager
def tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of `size_bytes` mounted at `path` (root only), always unmounted."""
    if os.geteuid() != 0:
        raise AssertionError("a tmpfs log dir needs root (mount)")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "kafkad-chaos", str(path)], check=True
    )
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=True)


def fill(path: Path, leave_bytes: int = 0) -> int:
    """Write `path` until its file system has at most `leave_bytes` free (or ENOSPC); returns bytes written."""
    chunk = b"\xa5" * (1 << 16)
    written = 0
    with open(path, "wb") as f:
        while True:
            st = os.statvfs(path.parent)
            free = st.f_bavail * st.f_frsize
            if free <= leave_bytes:
                break
            try:
                f.write(chunk[: max(4096, min(len(chunk), free - leave_bytes))])
                f.flush()
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
            written += len(chunk)
    return written


class DiskFull:
    """Fills the file system of a picked broker's log dir (its own tmpfs); heal removes the ballast."""

    def __init__(self, brokers: Brokers, pick: str, topic: str, partitions: int) -> None:
        self.brokers = brokers
        self.pick = pick
        self.topic = topic
        self.partitions = partitions
        self.name = f"disk-full-{pick}"
        self.ballast: Path | None = None

    def inject(self, rng: random.Random) -> str:
        t = pick_broker(self.brokers, self.pick, self.topic, self.partitions, rng)
        data = self.brokers.broker(t).data_dir
        self.ballast = data.parent / "ballast" if os.path.ismount(data.parent) else data / "ballast"
        fill(self.ballast)
        return f"broker {t}"

    def heal(self) -> None:
        if self.ballast is not None:
            self.ballast.unlink(missing_ok=True)
            self.ballast = None


def newest_segment(data_dir: Path, topic: str, partitions: Sequence[int]) -> Path:
    logs = [
        seg
        for p in partitions
        for seg in sorted((data_dir / f"{topic}-{p}").glob("*.log"))[-1:]
        if seg.stat().st_size > 0
    ]
    if not logs:
        raise AssertionError(f"no non-empty segment of {topic} under {data_dir}")
    return max(logs, key=lambda s: s.stat().st_mtime)


class DamagedSegment:
    """SIGTERM a picked broker, append `garbage` bytes to its newest non-empty segment, start it again."""

    def __init__(self, brokers: Brokers, pick: str, topic: str, partitions: int, garbage: int = 37) -> None:
        self.brokers = brokers
        self.pick = pick
        self.topic = topic
        self.partitions = partitions
        self.garbage = garbage
        self.name = f"damaged-segment-{pick}"

    def inject(self, rng: random.Random) -> str:
        t = pick_broker(self.brokers, self.pick, self.topic, self.partitions, rng)
        self.brokers.sigterm(t)
        seg = newest_segment(self.brokers.broker(t).data_dir, self.topic, range(self.partitions))
        with open(seg, "ab") as f:
            f.write(rng.randbytes(self.garbage))
        self.brokers.restart(t)  # must start: a damaged tail is recovered, not fatal
        return f"broker {t} {seg.parent.name}/{seg.name}"

    def heal(self) -> None:
        pass


class NetPartition:
    """A network partition made with nftables between namespaces (tests/chaos/netns.py).

    kinds: `isolate` (a broker from the other brokers; ZooKeeper and clients still reach it), `isolate-zk`
    (a broker from ZooKeeper only), `isolate-all` (from brokers, ZooKeeper and clients), `split` (a
    random minority of brokers from the majority).
    """

    KINDS = ("isolate", "isolate-zk", "isolate-all", "split")

    def __init__(
        self, net: ChaosNetLike, brokers: Brokers, kind: str, pick: str, topic: str, partitions: int
    ) -> None:
        assert kind in self.KINDS and pick in PICKS
        self.net = net
        self.brokers = brokers
        self.kind = kind
        self.pick = pick
        self.topic = topic
        self.partitions = partitions
        self.name = f"partition-{kind}-{pick}"
        self.min_hold_s = 0.0

    def inject(self, rng: random.Random) -> str:
        t = pick_broker(self.brokers, self.pick, self.topic, self.partitions, rng)
        if self.kind == "isolate":
            self.net.isolate(t)
        elif self.kind == "isolate-zk":
            self.net.cut_zookeeper(t)
        elif self.kind == "isolate-all":
            self.net.isolate(t, from_zookeeper=True, from_clients=True)
        else:
            self.net.split([t])
        return f"broker {t}"

    def heal(self) -> None:
        self.net.heal()


class ChaosNetLike(Protocol):
    def isolate(self, host: int, *, from_zookeeper: bool = False, from_clients: bool = False) -> None: ...
    def cut_zookeeper(self, host: int) -> None: ...
    def split(self, side: Iterable[int]) -> None: ...
    def heal(self) -> None: ...
