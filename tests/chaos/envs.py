"""Environments a chaos schedule runs against, each a context manager that always cleans up.

- `standalone_env`: one kafkad, its log dir on a small tmpfs (process faults, full disk, damaged segment).
- `cluster_env`: 3 kafkad brokers (tests.cluster.KafkadCluster) on a 3-node ZooKeeper ensemble (or one
  server), each broker's log dir on its own tmpfs; with `netns=True` every broker runs in its own network
  namespace with its own address (netns.py) and ZooKeeper listens on the bridge, so partitions are possible.
  The topic is RF 3 with min.insync.replicas=2; `healthy()` = every broker up, a controller, and every
  partition led with its full ISR (the next fault starts from a whole cluster).
With `lazyfs=True` each broker's log dir is on LazyFS (lazyfs.py) over that tmpfs, which adds the power-loss
nemeses (powerloss.py); `overrides` adds broker settings (e.g. log.flush.interval.messages).
`nemeses(names)` builds the named nemeses for the environment (NEMESES lists every name).
Leaving an environment without an exception checks every broker's log (tests/integration/log_gate.py): an
ERROR line or a traceback fails the run unless `expect_errors` names it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.chaos import wan
from tests.chaos.lazyfs import LazyMount
from tests.chaos.nemesis import (
    Brokers,
    DamagedSegment,
    DiskFull,
    Nemesis,
    NetPartition,
    ProcessFault,
    SingleBroker,
    ZooKeeperLoss,
    tmpfs,
)
from tests.chaos.netns import ChaosNet
from tests.chaos.powerloss import KINDS as POWER_KINDS
from tests.chaos.powerloss import PowerLoss
from tests.chaos.workload import create_topic
from tests.cluster.cluster import KafkadCluster, wait_until
from tests.cluster.zookeeper import ZooKeeperEnsemble, ZooKeeperServer
from tests.integration.broker_process import BrokerProcess

TOPIC = "chaos"
SESSION_TIMEOUT_MS = 6000
CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.wait.max.ms": "100",
    "unclean.leader.election.enable": "false",
    "log.segment.bytes": "1048576",
}

PROCESS = [f"{a}-{p}" for a in ProcessFault.ACTIONS for p in ("leader", "follower", "controller")]
ZOOKEEPER = ["zk-member-loss", "zk-leader-loss"]
DISK = ["disk-full-leader", "disk-full-follower", "damaged-segment-leader", "damaged-segment-follower"]
NETWORK = [f"partition-{k}-{p}" for k in NetPartition.KINDS for p in ("leader", "controller")]
WAN = list(wan.NAMES)  # lossy links (tests/chaos/wan.py)
POWER = [f"power-loss-{k}" for k in POWER_KINDS]
NEMESES = PROCESS + ZOOKEEPER + DISK + NETWORK + WAN + POWER
# ERROR lines a nemesis causes on purpose, allowed in every broker's log of a run that includes it (name prefix
# -> regexes): a full disk is a storage error, which Kafka logs at ERROR too.
EXPECTED_ERRORS = {"disk-full-": [r"No space left on device"]}


@dataclass
class ChaosEnv:
    brokers: Brokers
    bootstrap: str
    topic: str
    partitions: int
    cluster: KafkadCluster | None = None
    zookeeper: ZooKeeperEnsemble | ZooKeeperServer | None = None
    net: ChaosNet | None = None
    mounts: dict[int, LazyMount] | None = None  # broker id -> the LazyFS under its log dir

    def available(self) -> list[str]:
        names = list(PROCESS) + list(DISK)
        if self.cluster is None:  # one broker: it is the leader and the "controller"; no followers
            names = [n for n in names if not n.endswith("-follower")]
        if isinstance(self.zookeeper, ZooKeeperEnsemble):
            names += ZOOKEEPER
        if self.net is not None:
            names += NETWORK + WAN
        if self.mounts is not None:
            names += POWER
        return names

    def nemeses(self, names: Sequence[str] | None = None) -> list[Nemesis]:
        want = list(names) if names is not None else self.available()
        missing = set(want) - set(self.available())
        if missing:
            raise AssertionError(f"nemeses {sorted(missing)} need what this environment lacks")
        for prefix, patterns in EXPECTED_ERRORS.items():
            if any(n.startswith(prefix) for n in want):
                for i in self.brokers.ids:
                    self.brokers.broker(i).expect_errors += patterns
        return [self._make(n) for n in want]

    def _make(self, name: str) -> Nemesis:
        t, p, b = self.topic, self.partitions, self.brokers
        if name in WAN:
            assert self.net is not None and self.cluster is not None
            return wan.make(
                name, self.net, b, t, p, isr_sizes=self._isr_sizes, full_isr=len(self.cluster.ids),
                min_hold_s=int(CLUSTER_OVERRIDES["replica.lag.time.max.ms"]) / 1000 + 1,
            )  # fmt: skip
        pick = name.rsplit("-", 1)[1]
        if name in ZOOKEEPER:
            assert isinstance(self.zookeeper, ZooKeeperEnsemble)
            return ZooKeeperLoss(self.zookeeper, leader=name == "zk-leader-loss")
        if name in POWER:
            assert self.mounts is not None
            return PowerLoss(b, self.mounts, pick)
        if name.startswith("disk-full-"):
            return DiskFull(b, pick, t, p)
        if name.startswith("damaged-segment-"):
            return DamagedSegment(b, pick, t, p)
        if name.startswith("partition-"):
            assert self.net is not None
            part = NetPartition(self.net, b, name[len("partition-") : -len(pick) - 1], pick, t, p)
            if part.kind in ("isolate-zk", "isolate-all"):
                part.min_hold_s = SESSION_TIMEOUT_MS / 1000 + 2  # long enough to lose the session
            return part
        action = name.split("-", 1)[0]
        nem = ProcessFault(b, action, pick, t, p)
        if action == "sigstop" and self.cluster is not None:
            nem.min_hold_s = SESSION_TIMEOUT_MS / 1000 + 2  # past the ZooKeeper session timeout
        return nem

    def _isr_sizes(self) -> dict[int, int] | None:
        assert self.cluster is not None
        states = [self.cluster.partition_state(self.topic, q) for q in range(self.partitions)]
        return None if None in states else {q: len(s.isr) for q, s in enumerate(states) if s is not None}

    def healthy(self) -> bool:
        try:
            return self._healthy()
        except Exception:  # ZooKeeper unreachable for now (a member just died): not healthy yet
            return False

    def _healthy(self) -> bool:
        if self.cluster is None:
            return all(self.brokers.broker(i).running for i in self.brokers.ids)
        c = self.cluster
        if c.running_ids() != c.ids or c.controller_id() is None:
            return False
        for part in range(self.partitions):
            s = c.partition_state(self.topic, part)
            if s is None or s.leader < 0 or sorted(s.isr) != c.ids:
                return False
        return True

    def describe(self) -> str:
        return self.cluster.describe() if self.cluster is not None else ""


@contextlib.contextmanager
def standalone_env(
    base: Path,
    partitions: int = 3,
    fs_bytes: int = 48 << 20,
    *,
    lazyfs: bool = False,
    overrides: dict[str, str] | None = None,
) -> Iterator[ChaosEnv]:
    with tmpfs(base / "fs", fs_bytes) as fs, contextlib.ExitStack() as stack:
        mounts = {0: stack.enter_context(lazy_mount(fs, base / "mnt"))} if lazyfs else None
        b = BrokerProcess(
            base / "broker",
            {"num.partitions": str(partitions), "log.segment.bytes": "1048576", **(overrides or {})},
        )
        b.data_dir = (mounts[0].mountpoint if mounts else fs) / "data"
        with b:
            create_topic(b.bootstrap, TOPIC, partitions, 1)
            yield ChaosEnv(SingleBroker(b), b.bootstrap, TOPIC, partitions, mounts=mounts)


def lazy_mount(fs: Path, mountpoint: Path) -> LazyMount:
    """LazyFS over `fs`/backing (bookkeeping in `fs`/lazyfs: the same file system, for its renames)."""
    return LazyMount(
        fs / "backing", mountpoint, state=fs / "lazyfs", log_path=fs.parent / f"{mountpoint.name}.log"
    )


@contextlib.contextmanager
def cluster_env(
    base: Path,
    *,
    partitions: int = 3,
    ensemble: bool = True,
    netns: bool = False,
    fs_bytes: int = 64 << 20,
    size: int = 3,
    lazyfs: bool = False,
    overrides: dict[str, str] | None = None,
) -> Iterator[ChaosEnv]:
    with contextlib.ExitStack() as stack:
        net = stack.enter_context(ChaosNet(list(range(1, size + 1)))) if netns else None
        host = net.zk_addr if net is not None else "127.0.0.1"
        zk: ZooKeeperEnsemble | ZooKeeperServer
        if ensemble:
            zk = stack.enter_context(ZooKeeperEnsemble(base / "zk", 3, host=host))
        else:
            zk = stack.enter_context(ZooKeeperServer(base / "zk", host=host))
        ids = range(1, size + 1)
        c = KafkadCluster(
            base / "cluster",
            zk.connect_string,
            size,
            chroot=f"/chaos-{uuid.uuid4().hex[:8]}",
            overrides={**CLUSTER_OVERRIDES, **(overrides or {})},
            hosts={i: net.addr(i) for i in ids} if net is not None else None,
            ports={i: 9092 for i in ids} if net is not None else None,
            command_prefix={i: net.exec_prefix(i) for i in ids} if net is not None else None,
        )
        mounts: dict[int, LazyMount] | None = {} if lazyfs else None
        for i in ids:
            fs = stack.enter_context(tmpfs(base / f"fs{i}", fs_bytes))
            c.broker(i).data_dir = fs / "data"
            if mounts is not None:
                mounts[i] = stack.enter_context(lazy_mount(fs, base / f"mnt{i}"))
                c.broker(i).data_dir = mounts[i].mountpoint / "data"
        stack.callback(c.kill_all)  # after the clean stop below, or alone when starting failed
        c.start()
        stack.callback(c.stop)
        c.wait_registered(list(ids), timeout_s=60)
        c.wait_controller(timeout_s=60)
        create_topic(c.bootstrap, TOPIC, partitions, size, {"min.insync.replicas": "2"})
        env = ChaosEnv(c, c.bootstrap, TOPIC, partitions, cluster=c, zookeeper=zk, net=net, mounts=mounts)
        wait_until(env.healthy, 60, "a healthy cluster (leaders, full ISR)", detail=c.describe)
        yield env
    c.check_logs()  # after the clean stop, and only when the run itself raised nothing
