"""BrokerProcess: a real `kafkad` process for integration tests (shared by every integration module).

Starts `python -m kafkad.service.main` with a generated server.properties in a tmp dir, on 127.0.0.1 and a
free port that stays the same across restarts (clients keep their bootstrap). Startup waits for the
"started" log line and a TCP connect; a process that dies or stays silent fails the test loudly with its
log. stdout/stderr go to `<dir>/kafkad.log` (appended across restarts).

A port picked by `free_port` (below the kernel's ephemeral range, so no client socket can take it) can still
be bound by someone else before kafkad binds it (other test runs share the machine): the first start of a
broker whose port was not given retries on a fresh port when kafkad reports the address in use, and that
attempt's log goes to `kafkad.port-race-<port>.log` (not the gated kafkad.log). Restarts never move (clients
hold the bootstrap).

Cluster tests (tests/cluster, tests/chaos) also use `host` (a listener address other than 127.0.0.1, e.g.
inside a network namespace), `command_prefix` (e.g. `ip netns exec <ns>`, which execs in place so the pid
is kafkad's) and `sigstop()` / `sigcont()`.

Leaving the `with` block (no exception in flight) checks the whole log (tests/integration/log_gate.py): an
ERROR line or a traceback fails the test unless one of `expect_errors` (regexes) names it.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from tests.integration.log_gate import check_logs


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_BELOW_EPHEMERAL = (20000, min(_ephemeral_start(), 32768))


def free_port() -> int:
    """A free TCP port on 127.0.0.1, below the kernel's ephemeral range when it can: a port the kernel hands
    out (bind to 0) is also what it hands every outgoing connection, so a broker's port picked that way can be
    taken by another process's client socket (a ZooKeeper session, a peer broker) before the broker binds it,
    which a CI rehearsal met. Below that range only another explicit bind can take it (start() still retries
    then)."""
    lo, hi = _BELOW_EPHEMERAL
    if hi - lo > 1000:
        for _ in range(50):
            port = random.randrange(lo, hi)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue  # in use: another
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def thread_states(pid: int) -> list[str]:
    """The state letter (/proc/<pid>/task/<tid>/stat, after the command's closing parenthesis) of each
    of the process's threads."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except (FileNotFoundError, ProcessLookupError):  # a thread that just exited
            continue
        states.append(text[text.rindex(")") + 2])
    return states


def freeze(pid: int, timeout_s: float = 10.0) -> None:
    """SIGSTOP `pid` and return once every thread of it is stopped. kill() only queues the stop: each
    thread stops on its way back to user space, and on a loaded machine one may still answer a request
    a few milliseconds later (a paused ZooKeeper's NIO thread answered `srvr`)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while True:
        states = thread_states(pid)
        if all(s in "Tt" for s in states):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} not stopped {timeout_s} s after SIGSTOP: {states}")
        time.sleep(0.001)


def read_log(path: Path, offset: int = 0) -> str:
    """The text of a process log from byte `offset` on ('' before the file exists)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    return data[offset:].decode("utf-8", "replace")


class BrokerStartError(AssertionError):
    pass


class BrokerProcess:
    def __init__(
        self,
        base_dir: Path,
        overrides: Mapping[str, str] | None = None,
        *,
        port: int | None = None,
        startup_timeout_s: float = 90.0,
        host: str = "127.0.0.1",
        command_prefix: Sequence[str] = (),
        expect_errors: Sequence[str] = (),
    ) -> None:
        self.dir = Path(base_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.dir / "data"
        self.config_path = self.dir / "server.properties"
        self.log_path = self.dir / "kafkad.log"
        self.host = host
        self.command_prefix = tuple(command_prefix)
        self.port = port or free_port()
        self._port_movable = port is None  # until the first successful start
        self.overrides: dict[str, str] = dict(overrides or {})
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        # ERROR entries this broker's test causes on purpose (regexes, each with its reason at the test)
        self.expect_errors: list[str] = list(expect_errors)
        self.wait_loaded = True  # start() waits for the logs a crash left loading too (see _loaded)

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None, "broker not running"
        return self.proc.pid

    def _write_config(self) -> None:
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            "broker.id": "0",
            "num.partitions": "1",
            "log.flush.offset.checkpoint.interval.ms": "5000",
        }
        settings.update(self.overrides)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def start(self, overrides: Mapping[str, str] | None = None) -> int:
        """Start (or restart after stop/kill9) and wait until it serves; returns the port."""
        if self.running:
            raise RuntimeError("broker already running")
        if overrides:
            self.overrides.update(overrides)
        for _attempt in range(3):
            try:
                self._spawn()
                break
            except BrokerStartError:
                if not (self._port_movable and "address already in use" in self.log_text()):
                    raise
                self._set_aside_lost_start()
                self.port = free_port()  # lost the race for the port to another process: pick again
        else:
            raise BrokerStartError(f"no free port after 3 attempts; log:\n{self.log_text()}")
        self._port_movable = False
        return self.port

    def _set_aside_lost_start(self) -> None:
        """Move the log of a start that lost its port to `kafkad.port-race-<port>.log`: its CRITICAL "address
        already in use" line is the harness's race, not the test's, and the log gate reads kafkad.log."""
        with open(self.log_path, "r+b") as log:
            log.seek(self._log_offset)
            lost = log.read()
            log.truncate(self._log_offset)
        (self.dir / f"kafkad.port-race-{self.port}.log").write_bytes(lost)

    def _spawn(self) -> None:
        self._write_config()
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            log.write(f"--- start {time.strftime('%H:%M:%S')} ---\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [
                    *self.command_prefix,
                    sys.executable,
                    "-m",
                    "kafkad.service.main",
                    "--config",
                    str(self.config_path),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerStartError(
                    f"kafkad exited with {self.proc.returncode} during startup; log:\n{self.log_text()}"
                )
            text = self.log_text()
            if " started: " in text and self._connectable() and self._loaded(text):
                return
            time.sleep(0.05)
        self.kill9()
        raise BrokerStartError(
            f"kafkad did not start within {self.startup_timeout_s}s; log:\n{self.log_text()}"
        )

    def _loaded(self, text: str) -> bool:
        """After a crash a standalone broker serves while some logs still load ("; loading N more
        partitions" on its started line): unless `wait_loaded` is off, start() returns once every
        partition is loaded, as a test that acts at once on any partition expects."""
        started = next((line for line in text.splitlines() if " started: " in line), "")
        if not self.wait_loaded or "; loading " not in started:
            return True
        return "every partition is loaded" in text

    def _connectable(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        """Send `sig` and wait for the exit; returns the exit code (fails loudly if it hangs)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            if sig != signal.SIGCONT:
                self.sigcont()  # a paused process cannot act on SIGTERM
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(
                    f"kafkad did not exit within {timeout_s}s of {sig}; log:\n{self.log_text()}"
                ) from None
        code = self.proc.returncode
        self.proc = None
        return code

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def sigstop(self) -> None:
        """Freeze the process (a pause: GC, swap, a hung disk); sigcont() resumes it."""
        if self.proc is not None and self.proc.poll() is None:
            freeze(self.proc.pid)

    def sigcont(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self, overrides: Mapping[str, str] | None = None) -> int:
        self.stop()
        return self.start(overrides)

    # --- logs ------------------------------------------------------------------------------------
    def log_text(self, since_start: bool = True) -> str:
        return read_log(self.log_path, self._log_offset if since_start else 0)

    def check_log(self, expect_errors: Sequence[str] = ()) -> None:
        """AssertionError for an ERROR line or traceback in the whole log (every start) not named by
        `expect_errors` or self.expect_errors."""
        check_logs([(self.bootstrap, self.log_path)], [*self.expect_errors, *expect_errors])

    def __enter__(self) -> BrokerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.running:
            try:
                self.stop()
            except AssertionError:
                self.kill9()
        if exc_type is None:  # never hide the test's own failure behind this one
            self.check_log()
