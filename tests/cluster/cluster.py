"""KafkadCluster: N real kafkad processes in cluster mode on one ZooKeeper (standalone or ensemble).

Each broker is a tests.integration.broker_process.BrokerProcess with `broker.id` 1..N, its own dir
(`<base>/broker<id>`), a port that stays the same across restarts, and
`zookeeper.connect=<zk connect string>/<chroot>` (the chroot is created before the brokers start, so every
test run has its own namespace in a shared ZooKeeper).

ZkView reads the cluster's state from ZooKeeper with kazoo, JSON as in reference/zookeeper-layout.md:
/controller, /controller_epoch, /brokers/ids, /brokers/topics/<t>, .../partitions/<p>/state (its zkVersion
is the partition epoch). The harness reads ZooKeeper only; it never depends on the controller's or the
replication's code for its own correctness.

Faults: kill9(id), sigterm(id) (Kafka's clean shutdown; returns the exit code), sigstop(id) / sigcont(id),
restart(id). Logs: leaving the `with` block (or the kafkad_cluster fixture's teardown) runs check_logs(): an
ERROR line or a traceback in any broker's log fails the test unless `expect_errors` (regexes, the cluster's and
each BrokerProcess's) names it (tests/integration/log_gate.py). Waiting: wait_until(cond, timeout, what) returns the first truthy value of cond() or fails with
`what` and every broker's log tail; wait_controller / wait_leader / wait_isr build on it.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.retry import KazooRetry

from tests.integration.broker_process import BrokerProcess
from tests.integration.log_gate import check_logs

T = TypeVar("T")
log = logging.getLogger(__name__)


def wait_until(
    cond: Callable[[], T | None],
    timeout_s: float,
    what: str,
    *,
    interval_s: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll `cond` until it returns a truthy value (returned); AssertionError naming `what` after timeout_s.

    Exceptions from cond propagate (a broken condition should fail, not be retried into a timeout).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f"\n{detail()}" if detail is not None else ""
            raise AssertionError(f"{what}: not within {timeout_s}s{extra}")
        time.sleep(interval_s)


def wait_listening(host: str, port: int, timeout_s: float) -> None:
    """Return as soon as `host:port` accepts a connection (a restarting broker listens before it is
    registered and has the controller's metadata: the window restart() waits past)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"{host}:{port} not listening within {timeout_s} s") from None
            time.sleep(0.01)


class PartitionState(NamedTuple):
    """/brokers/topics/<t>/partitions/<p>/state; zk_version is the znode's version (partition epoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int


class ZkView:
    """Read-only view of a kafkad cluster's znodes (kazoo; `connect` may carry the chroot)."""

    def __init__(self, connect: str, timeout_s: float = 15.0, **options: Any) -> None:
        """`options`: KazooClient's (sasl_options, use_ssl/certfile/keyfile/ca) for a secured ZooKeeper."""
        self.client = KazooClient(hosts=connect, timeout=timeout_s, **options)
        self.client.start(timeout=timeout_s)
        # reads ride out a ZooKeeper member's loss (connection loss -> the next member), bounded
        self._retry = KazooRetry(max_tries=40, delay=0.05, max_delay=1.0, ignore_expire=False)

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        result: T = self._retry(fn, *args)
        return result

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def __enter__(self) -> ZkView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _json(self, path: str) -> tuple[Any, int] | None:
        try:
            data, stat = self._call(self.client.get, path)
        except NoNodeError:
            return None
        if not data:
            return None
        return json.loads(data.decode()), int(stat.version)

    def controller_id(self) -> int | None:
        got = self._json("/controller")
        return int(got[0]["brokerid"]) if got else None

    def controller_epoch(self) -> int | None:
        try:
            data, _ = self._call(self.client.get, "/controller_epoch")
        except NoNodeError:
            return None
        return int(data.decode()) if data else None

    def broker_ids(self) -> list[int]:
        try:
            return sorted(int(x) for x in self._call(self.client.get_children, "/brokers/ids"))
        except NoNodeError:
            return []

    def broker_epoch(self, broker_id: int) -> int | None:
        """czxid of /brokers/ids/<id> (KIP-380), None when the broker is not registered."""
        stat = self._call(self.client.exists, f"/brokers/ids/{broker_id}")
        return int(stat.czxid) if stat is not None else None

    def topics(self) -> list[str]:
        try:
            return sorted(self._call(self.client.get_children, "/brokers/topics"))
        except NoNodeError:
            return []

    def assignment(self, topic: str) -> dict[int, list[int]]:
        got = self._json(f"/brokers/topics/{topic}")
        if got is None:
            return {}
        return {int(p): [int(r) for r in rs] for p, rs in got[0]["partitions"].items()}

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        got = self._json(f"/brokers/topics/{topic}/partitions/{partition}/state")
        if got is None:
            return None
        d, version = got
        return PartitionState(
            leader=int(d["leader"]),
            leader_epoch=int(d["leader_epoch"]),
            isr=tuple(int(x) for x in d["isr"]),
            controller_epoch=int(d["controller_epoch"]),
            zk_version=version,
        )


class KafkadCluster:
    """`size` kafkad brokers (ids 1..size) on ZooKeeper `zk_connect` under `chroot`.

    `hosts` / `command_prefix` (per broker id) place a broker in a network namespace (tests/chaos/netns.py);
    by default every broker listens on 127.0.0.1 with its own free port.
    `zk_options`: how the harness's kazoo logs in to a secured ZooKeeper (KazooClient keyword arguments);
    `create_chroot=False` leaves the chroot to the brokers (created with their ACL, not an open one).
    """

    def __init__(
        self,
        base_dir: Path,
        zk_connect: str,
        size: int = 3,
        *,
        chroot: str = "/kafkad",
        overrides: Mapping[str, str] | None = None,
        broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
        hosts: Mapping[int, str] | None = None,
        ports: Mapping[int, int] | None = None,
        command_prefix: Mapping[int, Sequence[str]] | None = None,
        startup_timeout_s: float = 90.0,
        expect_errors: Sequence[str] = (),
        zk_options: Mapping[str, Any] | None = None,
        create_chroot: bool = True,
    ) -> None:
        assert chroot.startswith("/") and chroot != "/", "chroot must be a path like /kafkad-test"
        self.dir = Path(base_dir)
        self.zk_options = dict(zk_options or {})
        self.create_chroot = create_chroot
        self.zk_connect = zk_connect
        self.chroot = chroot
        self.brokers: dict[int, BrokerProcess] = {}
        # ERROR entries the test causes on purpose, in any broker's log (regexes; say why at the test)
        self.expect_errors: list[str] = list(expect_errors)
        common = {
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.session.timeout.ms": "6000",
            "num.partitions": "1",
            **(overrides or {}),
        }
        for bid in range(1, size + 1):
            o = {**common, "broker.id": str(bid), **((broker_overrides or {}).get(bid, {}))}
            self.brokers[bid] = BrokerProcess(
                self.dir / f"broker{bid}",
                o,
                port=(ports or {}).get(bid),
                startup_timeout_s=startup_timeout_s,
                host=(hosts or {}).get(bid, "127.0.0.1"),
                command_prefix=(command_prefix or {}).get(bid, ()),
            )
        self._view: ZkView | None = None

    # --- addresses ----------------------------------------------------------------------------------
    @property
    def zookeeper_connect(self) -> str:
        return f"{self.zk_connect}{self.chroot}"

    @property
    def ids(self) -> list[int]:
        return sorted(self.brokers)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def broker(self, bid: int) -> BrokerProcess:
        return self.brokers[bid]

    def running_ids(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.running]

    @property
    def zk(self) -> ZkView:
        """A kazoo view of the cluster's chroot (opened on first use, closed by stop())."""
        if self._view is None:
            self._view = ZkView(self.zookeeper_connect, **self.zk_options)
        return self._view

    # --- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        if self.create_chroot:
            with ZkView(self.zk_connect, **self.zk_options) as root:
                root.client.ensure_path(self.chroot)
        for b in self.brokers.values():
            b.start()

    def stop(self) -> None:
        """Stop every broker (SIGTERM, kill -9 if it hangs), close the ZooKeeper view."""
        for b in self.brokers.values():
            if b.running:
                try:
                    b.stop(timeout_s=30.0)
                except AssertionError:
                    b.kill9()
            else:
                b.kill9()  # reaps a process that died by itself
        if self._view is not None:
            self._view.close()
            self._view = None

    def __enter__(self) -> KafkadCluster:
        try:
            self.start()
        except BaseException:
            self.kill_all()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if exc_type is None:  # never hide the test's own failure behind this one
            self.check_logs()

    def check_logs(self) -> None:
        """AssertionError for an ERROR line or traceback in any broker's whole log not named as expected."""
        check_logs(
            [(f"broker {bid}", b.log_path) for bid, b in self.brokers.items()],
            [*self.expect_errors, *(p for b in self.brokers.values() for p in b.expect_errors)],
        )

    def kill_all(self) -> None:
        for b in self.brokers.values():
            b.kill9()
        if self._view is not None:
            self._view.close()
            self._view = None

    # --- faults -------------------------------------------------------------------------------------
    def kill9(self, bid: int) -> None:
        self.brokers[bid].kill9()

    def sigterm(self, bid: int, timeout_s: float = 60.0) -> int:
        """Clean shutdown (controlled shutdown in cluster mode); returns the exit code."""
        return self.brokers[bid].stop(timeout_s=timeout_s)

    def sigstop(self, bid: int) -> None:
        self.brokers[bid].sigstop()

    def sigcont(self, bid: int) -> None:
        self.brokers[bid].sigcont()

    def restart(self, bid: int) -> None:
        """Start broker `bid` again (after kill9/sigterm), or stop + start it if it runs."""
        b = self.brokers[bid]
        if b.running:
            b.stop()
        else:
            b.kill9()  # reap it if it died by itself
        b.start()

    # --- waiting on ZooKeeper state -----------------------------------------------------------------
    def wait_until(self, cond: Callable[[], T | None], timeout_s: float, what: str) -> T:
        return wait_until(cond, timeout_s, what, detail=self.describe)

    def controller_id(self) -> int | None:
        return self.zk.controller_id()

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.zk.partition_state(topic, partition)

    def leader_of(self, topic: str, partition: int) -> int | None:
        s = self.zk.partition_state(topic, partition)
        return s.leader if s is not None and s.leader >= 0 else None

    def replicas_of(self, topic: str, partition: int) -> list[int]:
        return self.zk.assignment(topic).get(partition, [])

    def wait_controller(self, timeout_s: float = 60.0, exclude: Sequence[int] = ()) -> int:
        """The controller's broker id once /controller names a broker not in `exclude`."""

        def ok() -> int | None:
            c = self.zk.controller_id()
            return c if c is not None and c not in exclude else None

        return self.wait_until(ok, timeout_s, f"a controller (not {list(exclude)}) in /controller")

    def wait_registered(self, ids: Sequence[int] | None = None, timeout_s: float = 60.0) -> None:
        want = set(ids if ids is not None else self.running_ids())
        self.wait_until(
            lambda: want <= set(self.zk.broker_ids()), timeout_s, f"brokers {sorted(want)} in /brokers/ids"
        )

    def wait_leader(
        self, topic: str, partition: int, timeout_s: float = 60.0, exclude: Sequence[int] = ()
    ) -> PartitionState:
        """The partition's state once it has a leader (>= 0) not in `exclude`."""

        def ok() -> PartitionState | None:
            s = self.zk.partition_state(topic, partition)
            return s if s is not None and s.leader >= 0 and s.leader not in exclude else None

        return self.wait_until(ok, timeout_s, f"a leader of {topic}-{partition} (not {list(exclude)})")

    def wait_isr(
        self, topic: str, partition: int, size: int | None = None, timeout_s: float = 60.0, what: str = ""
    ) -> PartitionState:
        """The partition's state once it has a leader and an ISR of `size` replicas (default: all brokers)."""
        want = len(self.brokers) if size is None else size

        def ok() -> PartitionState | None:
            s = self.zk.partition_state(topic, partition)
            return s if s is not None and s.leader >= 0 and len(s.isr) == want else None

        return self.wait_until(ok, timeout_s, what or f"an ISR of {want} for {topic}-{partition}")

    def describe(self) -> str:
        parts = []
        try:
            parts.append(f"controller={self.zk.controller_id()} registered={self.zk.broker_ids()}")
        except Exception as e:  # describing must never hide the original failure
            parts.append(f"(zookeeper unreadable: {e!r})")
        for bid, b in self.brokers.items():
            state = "running" if b.running else "down"
            parts.append(f"--- broker {bid} {b.bootstrap} {state}\n{b.log_text(since_start=False)[-2000:]}")
        return "\n".join(parts)
