"""The ZooKeeper fixtures themselves: a real server starts and serves, an ensemble survives the kill -9
of its leader, a paused member comes back, and kazoo sees ephemeral znodes vanish when a session closes."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.cluster.cluster import wait_until
from tests.cluster.zookeeper import ZooKeeperEnsemble, ZooKeeperServer, drop_empty_tail_txn_log, four_letter

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]


def _client(connect: str) -> KazooClient:
    c = KazooClient(hosts=connect, timeout=10.0)
    c.start(timeout=30)
    return c


def test_standalone_serves_and_cleans_up(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk") as zk:
        host, port = zk.connect_string.split(":")
        assert four_letter(host, int(port), "ruok") == "imok"
        assert zk.node.mode() == "standalone"
        pid = zk.node.pid
        c = _client(zk.connect_string)
        try:
            c.create("/harness/x", b"1", makepath=True)
            assert c.get("/harness/x")[0] == b"1"
        finally:
            c.stop()
            c.close()
    assert not zk.node.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _write_then_kill9(zk: ZooKeeperServer, path: str) -> None:
    c = _client(zk.connect_string)
    try:
        c.create(path, b"v")
    finally:
        c.stop()
        c.close()
    zk.node.kill9()
    assert not zk.node.ruok()


def _read(zk: ZooKeeperServer, path: str) -> bytes:
    c = _client(zk.connect_string)
    try:
        return bytes(c.get(path)[0])
    finally:
        c.stop()
        c.close()


def test_standalone_restart_keeps_data(zk_server: ZooKeeperServer) -> None:
    _write_then_kill9(zk_server, "/persist")
    zk_server.node.start()
    assert _read(zk_server, "/persist") == b"v"


def test_restart_after_a_kill_that_left_an_empty_newest_txn_log(zk_server: ZooKeeperServer) -> None:
    """The CI failure of session 7: kill -9 right after ZooKeeper created a new txn log left it empty,
    and Debian's ZooKeeper 3.8 then exits 1 at start (ZOOKEEPER-2332). Made here on purpose."""
    _write_then_kill9(zk_server, "/before-kill")
    logs = zk_server.node.data_dir / "version-2"
    newest = max(int(f.suffix[1:], 16) for f in logs.glob("log.*"))
    (logs / f"log.{newest + 0x100:x}").touch()
    zk_server.node.start()
    assert "deleted the empty newest txn log" in zk_server.node.log_text()
    assert _read(zk_server, "/before-kill") == b"v"


def test_drop_empty_tail_txn_log_only_drops_an_empty_newest_log(tmp_path: Path) -> None:
    logs = tmp_path / "version-2"
    logs.mkdir()
    assert drop_empty_tail_txn_log(tmp_path) is None  # no logs at all
    (logs / "log.9").write_bytes(b"x" * 16)
    (logs / "log.a").touch()  # empty but not the newest: damage ZooKeeper must report
    (logs / "log.100").write_bytes(b"x" * 16)  # newest by zxid (0x100 > 0xa, though "log.a" sorts last)
    assert drop_empty_tail_txn_log(tmp_path) is None
    assert sorted(f.name for f in logs.iterdir()) == ["log.100", "log.9", "log.a"]
    (logs / "log.1000").touch()
    assert drop_empty_tail_txn_log(tmp_path) == logs / "log.1000"
    assert sorted(f.name for f in logs.iterdir()) == ["log.100", "log.9", "log.a"]
    (logs / "log.1001").write_bytes(b"x")  # short but not empty: left for ZooKeeper to report
    assert drop_empty_tail_txn_log(tmp_path) is None
    assert (logs / "log.1001").exists()


def test_ephemeral_vanishes_after_session_close(zk_server: ZooKeeperServer) -> None:
    owner = _client(zk_server.connect_string)
    watcher = _client(zk_server.connect_string)
    try:
        owner.create("/brokers/ids/7", b"{}", ephemeral=True, makepath=True)
        assert watcher.exists("/brokers/ids/7") is not None
        owner.stop()
        owner.close()
        wait_until(lambda: watcher.exists("/brokers/ids/7") is None, 10, "ephemeral gone")
    finally:
        watcher.stop()
        watcher.close()


def test_ensemble_survives_leader_kill9(zk_ensemble: ZooKeeperEnsemble) -> None:
    assert len(zk_ensemble.connect_string.split(",")) == 3
    modes = zk_ensemble.modes()
    assert sorted(modes.values()) == ["follower", "follower", "leader"], modes
    c = _client(zk_ensemble.connect_string)
    try:
        c.create("/before", b"1")
        old = zk_ensemble.wait_leader()
        zk_ensemble.node(old).kill9()
        new = zk_ensemble.wait_leader(timeout_s=30, exclude=[old])
        assert new != old
        wait_until(lambda: c.connected, 30, "kazoo reconnected")
        c.retry(c.create, "/after", b"2")
        assert c.get("/before")[0] == b"1"
        # the killed member rejoins as a follower and has every write
        zk_ensemble.node(old).start()
        zk_ensemble.wait_quorum(timeout_s=60)
        assert zk_ensemble.node(old).mode() == "follower"
        direct = _client(zk_ensemble.node(old).address)
        try:
            direct.sync("/after")
            assert direct.get("/after")[0] == b"2"
        finally:
            direct.stop()
            direct.close()
    finally:
        c.stop()
        c.close()


def test_ensemble_member_pause_and_quorum_loss(zk_ensemble: ZooKeeperEnsemble) -> None:
    leader = zk_ensemble.wait_leader()
    followers = [i for i in zk_ensemble.nodes if i != leader]
    paused = zk_ensemble.node(followers[0])
    paused.sigstop()
    try:
        assert paused.mode() == ""  # a frozen JVM does not answer
        c = _client(zk_ensemble.node(leader).address)
        try:
            c.create("/while-paused", b"x")  # 2 of 3 still form a quorum
        finally:
            c.stop()
            c.close()
    finally:
        paused.sigcont()
    zk_ensemble.wait_quorum(timeout_s=60)
    # losing two members: the survivor stops serving (no quorum), then serves again once one is back
    zk_ensemble.node(followers[0]).kill9()
    zk_ensemble.node(followers[1]).kill9()
    wait_until(lambda: zk_ensemble.node(leader).mode() == "", 30, "lone member stops serving")
    zk_ensemble.node(followers[0]).start()
    zk_ensemble.wait_quorum(timeout_s=60)


def test_ensemble_member_losing_its_port_race_is_started_again_on_new_ports(tmp_path: Path) -> None:
    """A member whose client port another process took before its JVM bound it exits at start; the
    ensemble must not go on with the other two (the first member kill would then leave no quorum)."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    ens = ZooKeeperEnsemble(tmp_path / "ens", 3)
    ens.nodes[3].client_port = taken.getsockname()[1]
    try:
        with ens:
            assert sorted(ens.modes().values()) == ["follower", "follower", "leader"], ens.describe()
            assert taken.getsockname()[1] not in [n.client_port for n in ens.nodes.values()]
    finally:
        taken.close()
