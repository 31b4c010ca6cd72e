"""Real ZooKeeper servers for cluster tests: a standalone server and a 3-node ensemble on loopback.

Debian's ZooKeeper 3.8 is started with java directly (environment.md): each node gets its own dataDir
(and `myid` in an ensemble) under the test's tmp path, free ports, `admin.enableServer=false` and the
four-letter words ruok/srvr/stat/mntr. Ready = `ruok` answers `imok` AND `srvr` reports a serving mode
(standalone / leader / follower): `imok` alone only says the JVM is up, not that the node joined a quorum.

Java or zookeeper.jar missing is a loud failure (ZooKeeperUnavailable, an AssertionError), never a skip.
Every JVM gets PR_SET_PDEATHSIG=SIGKILL, so a test runner killed hard does not leave ZooKeepers behind;
the context managers stop every node they started (kill -9 after a SIGTERM that hangs).

Faults on one node: stop() (SIGTERM), kill9(), sigstop()/sigcont(), start() again on the same ports
and dataDir. `leader()` asks every node for its mode with `srvr`.

A kill -9 between ZooKeeper creating a new transaction log and writing its header leaves an empty
`version-2/log.*` as the newest file, and ZooKeeper 3.8 then refuses to start ("Unable to load database
on disk", EOFException in FileHeader.deserialize): ZOOKEEPER-2332, fixed upstream in 2024 by deleting that
empty tail file at load. Debian's 3.8.0 predates the fix, so `spawn()` does what the fix does before each
start (`drop_empty_tail_txn_log`): the file holds no transaction, so nothing acknowledged is lost.

Security (`security=ZkServerSecurity(...)`): SASL DIGEST-MD5 users from a server JAAS `Server` section
(SASLAuthenticationProvider), optionally required of every session (enforce.auth / sessionRequireClientSASLAuth),
and/or a `secureClientPort` (Netty, PEM key and trust stores) that requires client certificates (their
subject becomes the session's `x509` identity). The plain clientPort stays for the four-letter words (and as
the door an unauthenticated client walks through). Debian's zookeeper.jar lists netty-handler but not
netty-codec/netty-resolver in its Class-Path: the secure port needs them added.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tests.integration.broker_process import freeze, read_log

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_JAR = Path("/usr/share/java/slf4j-simple.jar")
NETTY_JARS = (Path("/usr/share/java/netty-codec.jar"), Path("/usr/share/java/netty-resolver.jar"))
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
SERVING_MODES = ("standalone", "leader", "follower")
_PR_SET_PDEATHSIG = 1


class ZooKeeperUnavailable(AssertionError):
    """java or Debian's zookeeper.jar is missing: `make test` installs them (deb-deps)."""


class ZooKeeperStartError(AssertionError):
    pass


@dataclass(frozen=True)
class ZkServerSecurity:
    """What a test ZooKeeper asks of its clients."""

    sasl_users: Mapping[str, str] = field(default_factory=dict)  # DIGEST-MD5 user -> password
    require_sasl: bool = False  # no session without a SASL login
    tls_keystore: Path | None = None  # PEM key + certificate: a secure port requiring client certificates
    tls_truststore: Path | None = None  # PEM CAs that sign the client certificates

    def jaas(self) -> str:
        users = "".join(f'\n  user_{u}="{p}"' for u, p in self.sasl_users.items())
        return f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required{users};\n}};\n"

    def config_lines(self, host: str, secure_port: int | None) -> list[str]:
        lines = []
        if self.sasl_users:
            lines.append("authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
        if self.require_sasl:
            lines += [
                "enforce.auth.enabled=true",
                "enforce.auth.schemes=sasl",
                "sessionRequireClientSASLAuth=true",
            ]
        if secure_port is not None:
            assert self.tls_keystore is not None and self.tls_truststore is not None
            lines += [
                f"secureClientPort={secure_port}",
                f"secureClientPortAddress={host}",
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
                f"ssl.keyStore.location={self.tls_keystore}",
                "ssl.keyStore.type=PEM",
                f"ssl.trustStore.location={self.tls_truststore}",
                "ssl.trustStore.type=PEM",
                "ssl.clientAuth=need",
            ]
        return lines


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_installed(tls: bool = False) -> str:
    """Path of java; raises ZooKeeperUnavailable naming what is missing and how to get it."""
    java = shutil.which("java")
    missing = [str(p) for p in (ZK_JAR, SLF4J_JAR, *(NETTY_JARS if tls else ())) if not p.exists()]
    if java is None:
        missing.insert(0, "java (openjdk-17-jre-headless)")
    if missing:
        raise ZooKeeperUnavailable(
            "ZooKeeper tests need " + ", ".join(missing) + ": run `make deb-deps` "
            "(apt-get install -y zookeeper openjdk-17-jre-headless)"
        )
    assert java is not None
    return java


def drop_empty_tail_txn_log(data_dir: Path) -> Path | None:
    """Delete the newest transaction log of `data_dir` if it is empty (ZOOKEEPER-2332); return it if so.

    Only the newest and only when empty, as the upstream fix: an empty log in the middle, or a short
    non-empty one, is real damage that ZooKeeper must go on reporting.
    """
    logs = sorted((data_dir / "version-2").glob("log.*"), key=lambda f: int(f.suffix[1:], 16))
    if logs and logs[-1].stat().st_size == 0:
        logs[-1].unlink()
        return logs[-1]
    return None


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def four_letter(host: str, port: int, cmd: str, timeout_s: float = 1.0) -> str:
    """Send a four-letter word; returns the answer ('' when the node does not answer)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(cmd.encode())
            chunks = []
            while True:
                c = s.recv(4096)
                if not c:
                    break
                chunks.append(c)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


def wait_for(what: str, cond: Callable[[], bool], timeout_s: float, detail: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if cond():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout_s}s\n{detail()}")
        time.sleep(0.05)


class ZooKeeperNode:
    """One ZooKeeper JVM. `peers` (ensemble only): (myid, host, peer_port, election_port) of every member."""

    def __init__(
        self,
        base_dir: Path,
        *,
        myid: int = 0,
        host: str = "127.0.0.1",
        client_port: int | None = None,
        peers: Sequence[tuple[int, str, int, int]] = (),
        tick_ms: int = 500,
        max_session_timeout_ms: int = 60000,
        security: ZkServerSecurity | None = None,
    ) -> None:
        self.security = security
        tls = security is not None and security.tls_keystore is not None
        self.java = check_installed(tls)
        self.secure_port: int | None = free_port(host) if tls else None
        self.dir = Path(base_dir)
        self.data_dir = self.dir / "data"
        self.cfg_path = self.dir / "zoo.cfg"
        self.log_path = self.dir / "zookeeper.log"
        self.myid = myid
        self.host = host
        self.client_port = client_port or free_port(host)
        self.peers = tuple(peers)
        self.tick_ms = tick_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def secure_address(self) -> str:
        assert self.secure_port is not None, "no secure port: start with security=ZkServerSecurity(tls_...)"
        return f"{self.host}:{self.secure_port}"

    def new_ports(self) -> None:
        """Pick free ports again (lost a race for one)."""
        self.client_port = free_port(self.host)
        if self.secure_port is not None:
            self.secure_port = free_port(self.host)

    @property
    def pid(self) -> int:
        assert self.proc is not None, "node not running"
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.client_port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr",
            f"minSessionTimeout={2 * self.tick_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "forceSync=no",  # page cache survives kill -9 of the JVM; saves fsyncs on a shared machine
            "maxClientCnxns=0",
            "autopurge.purgeInterval=0",
        ]
        if self.security is not None:
            lines += self.security.config_lines(self.host, self.secure_port)
            (self.dir / "jaas.conf").write_text(self.security.jaas())
        if self.peers:
            lines += ["initLimit=20", "syncLimit=5", "cnxTimeout=1000"]
            lines += [f"server.{i}={h}:{p}:{e}" for i, h, p, e in self.peers]
            (self.data_dir / "myid").write_text(f"{self.myid}\n")
        self.cfg_path.write_text("\n".join(lines) + "\n")

    def spawn(self) -> None:
        """Start the JVM without waiting for it (an ensemble starts all members, then waits)."""
        if self.running:
            raise RuntimeError(f"zookeeper {self.myid} already running")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        dropped = drop_empty_tail_txn_log(self.data_dir)
        jars = [ZK_JAR, SLF4J_JAR, *(NETTY_JARS if self.secure_port is not None else ())]
        cp = ":".join(str(j) for j in jars)
        cmd = [self.java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp]
        if self.security is not None and self.security.sasl_users:
            cmd.append(f"-Djava.security.auth.login.config={self.dir / 'jaas.conf'}")
        cmd += ["-Dzookeeper.admin.enableServer=false", MAIN_CLASS, str(self.cfg_path)]
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            log.write(f"--- start {time.strftime('%H:%M:%S')} ---\n".encode())
            if dropped is not None:
                log.write(
                    f"--- harness: deleted the empty newest txn log {dropped.name} (ZOOKEEPER-2332)\n".encode()
                )
            log.flush()
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, preexec_fn=_die_with_parent
            )

    def mode(self) -> str:
        """'standalone' / 'leader' / 'follower', or '' when not serving (or not answering)."""
        for line in four_letter(self.host, self.client_port, "srvr").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def ruok(self) -> bool:
        return four_letter(self.host, self.client_port, "ruok") == "imok"

    def serving(self) -> bool:
        return self.running and self.ruok() and self.mode() in SERVING_MODES

    def wait_serving(self, timeout_s: float = 60.0) -> None:
        def ok() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise ZooKeeperStartError(
                    f"zookeeper {self.myid} exited with {self.proc.returncode}; log:\n{self.log_text()[-4000:]}"
                )
            return self.serving()

        wait_for(f"zookeeper {self.myid} serving on {self.address}", ok, timeout_s, self._tail)

    def start(self, timeout_s: float = 60.0) -> None:
        self.spawn()
        self.wait_serving(timeout_s)

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM (SIGCONT first, so a paused node can die), kill -9 if it hangs."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
                self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def sigstop(self) -> None:
        assert self.running, f"zookeeper {self.myid} not running"
        freeze(self.pid)  # returns once every JVM thread is stopped, not when the signal is queued

    def sigcont(self) -> None:
        assert self.running, f"zookeeper {self.myid} not running"
        os.kill(self.pid, signal.SIGCONT)

    def log_text(self, since_start: bool = True) -> str:
        return read_log(self.log_path, self._log_offset if since_start else 0)

    def _tail(self) -> str:
        return f"log of zookeeper {self.myid} ({self.log_path}):\n{self.log_text()[-3000:]}"


def _address_in_use(nodes: Sequence[ZooKeeperNode]) -> bool:
    return any("Address already in use" in n.log_text() for n in nodes)


class ZooKeeperServer:
    """A standalone ZooKeeper; `with ZooKeeperServer(tmp) as zk: zk.connect_string`."""

    def __init__(
        self,
        base_dir: Path,
        *,
        host: str = "127.0.0.1",
        tick_ms: int = 500,
        security: ZkServerSecurity | None = None,
    ) -> None:
        self.node = ZooKeeperNode(Path(base_dir), host=host, tick_ms=tick_ms, security=security)

    @property
    def connect_string(self) -> str:
        return self.node.address

    @property
    def secure_connect_string(self) -> str:
        """host:port of the TLS port (client certificates required)."""
        return self.node.secure_address

    def start(self, timeout_s: float = 60.0) -> None:
        for _attempt in range(3):
            self.node.spawn()
            try:
                self.node.wait_serving(timeout_s)
                return
            except AssertionError:
                self.node.kill9()
                if not _address_in_use([self.node]):
                    raise
                self.node.new_ports()  # lost the port race: pick again
        raise ZooKeeperStartError("no free port for ZooKeeper after 3 attempts")

    def stop(self) -> None:
        self.node.stop()

    def kill9(self) -> None:
        self.node.kill9()

    def __enter__(self) -> ZooKeeperServer:
        try:
            self.start()
        except BaseException:
            self.node.kill9()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.node.stop()


class ZooKeeperEnsemble:
    """`size` ZooKeeper servers (myid 1..size) on `host`, own ports and dataDirs; quorum = size // 2 + 1."""

    def __init__(self, base_dir: Path, size: int = 3, *, host: str = "127.0.0.1", tick_ms: int = 500) -> None:
        self.dir = Path(base_dir)
        self.size = size
        self.host = host
        self.tick_ms = tick_ms
        self.nodes: dict[int, ZooKeeperNode] = {}
        self._build()

    def _build(self) -> None:
        peers = [(i, self.host, free_port(self.host), free_port(self.host)) for i in range(1, self.size + 1)]
        self.nodes = {
            i: ZooKeeperNode(
                self.dir / f"zk{i}",
                myid=i,
                host=self.host,
                client_port=free_port(self.host),
                peers=peers,
                tick_ms=self.tick_ms,
            )
            for i in range(1, self.size + 1)
        }

    @property
    def connect_string(self) -> str:
        return ",".join(n.address for n in self.nodes.values())

    def node(self, myid: int) -> ZooKeeperNode:
        return self.nodes[myid]

    def start(self, timeout_s: float = 90.0) -> None:
        for _attempt in range(3):
            for n in self.nodes.values():
                n.spawn()
            try:
                # every member, not only the running ones: one that died at start (its port taken
                # between free_port and the JVM's bind) left a 2-node quorum that the first member
                # kill then broke
                self.wait_quorum(timeout_s, members=list(self.nodes))
                return
            except AssertionError:
                in_use = _address_in_use(list(self.nodes.values()))
                self.kill_all()
                if not in_use:
                    raise
                for n in self.nodes.values():  # a port was taken meanwhile: new ports, clean dataDirs
                    shutil.rmtree(n.dir, ignore_errors=True)
                self._build()
        raise ZooKeeperStartError("no free ports for the ZooKeeper ensemble after 3 attempts")

    def wait_quorum(self, timeout_s: float = 60.0, members: Sequence[int] | None = None) -> None:
        """Every running member (or `members`) serves, and exactly one of them is the leader."""

        def ok() -> bool:
            ids = members if members is not None else [i for i, n in self.nodes.items() if n.running]
            exited = [i for i in ids if not self.nodes[i].running]
            if exited:  # it will not serve: say so now, not after timeout_s
                raise AssertionError(f"ZooKeeper {exited} exited\n{self.describe()}")
            modes = [self.nodes[i].mode() for i in ids]
            return all(m in ("leader", "follower") for m in modes) and modes.count("leader") == 1

        wait_for("ZooKeeper ensemble quorum", ok, timeout_s, self.describe)

    def modes(self) -> dict[int, str]:
        return {i: (n.mode() if n.running else "down") for i, n in self.nodes.items()}

    def leader(self) -> int | None:
        """myid of the node that reports `Mode: leader` (None while there is none)."""
        leaders = [i for i, m in self.modes().items() if m == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def wait_leader(self, timeout_s: float = 30.0, exclude: Sequence[int] = ()) -> int:
        found: list[int] = []

        def ok() -> bool:
            ld = self.leader()
            if ld is None or ld in exclude:
                return False
            found.append(ld)
            return True

        wait_for(f"a ZooKeeper leader (not {list(exclude)})", ok, timeout_s, self.describe)
        return found[-1]

    def describe(self) -> str:
        parts = [f"modes: {self.modes()}"]
        for i, n in self.nodes.items():
            parts.append(
                f"--- zk{i} {n.address} pid={n.proc.pid if n.proc else None}\n{n.log_text()[-1500:]}"
            )
        return "\n".join(parts)

    def kill_all(self) -> None:
        for n in self.nodes.values():
            n.kill9()

    def stop(self) -> None:
        for n in self.nodes.values():
            n.stop()

    def __enter__(self) -> ZooKeeperEnsemble:
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
