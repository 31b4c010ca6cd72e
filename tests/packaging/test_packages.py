"""Build kafkad's .deb and .rpm with packaging/build.sh, inspect them, and install the .deb for real.

The install test runs the packaged /usr/bin/kafkad as the kafkad user (like the unit does) with
NOTIFY_SOCKET pointing at our own datagram socket, waits for READY=1, does a produce/consume round
trip with confluent-kafka, checks /healthz and /metrics, stops it with SIGTERM, removes the package and
checks that the data stayed. It changes this machine (dpkg -i / -r), so it needs root.

The wrappers' interpreter choice (/usr/bin/python3.11, else /usr/bin/python3 if it is 3.11, else a clear
error) is tested on the real wrapper scripts from the .deb, run in a private mount namespace
(`unshare --mount`, root) whose /usr/bin is a fake holding only sh and the pythons of each scenario.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VERSION = next(
    line.split('"')[1]
    for line in (REPO / "kafkad/__init__.py").read_text().splitlines()
    if "__version__" in line
)
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}

pytestmark = pytest.mark.packaging


@dataclass(frozen=True, slots=True)
class Built:
    deb: Path
    rpm: Path


def _run(*cmd: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=CLEAN_ENV)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def _ensure_debian_package(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        assert os.geteuid() == 0, f"{tool} (Debian package {package}) is missing and we are not root"
        _run("apt-get", "install", "-y", "-qq", package, timeout=300)
        path = shutil.which(tool)
    assert path, f"{tool} is required (Debian package {package})"
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "OUT": str(out), "BUILD": str(tmp_path_factory.mktemp("build"))}
    result = subprocess.run(
        ["bash", str(REPO / "packaging/build.sh")], capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stderr
    arch = _run("dpkg", "--print-architecture").stdout.strip()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}[arch]
    built = Built(out / f"kafkad_{VERSION}_{arch}.deb", out / f"kafkad-{VERSION}.{machine}.rpm")
    assert result.stdout.split() == [str(built.deb), str(built.rpm)]
    assert built.deb.is_file() and built.rpm.is_file()
    return built


EXPECTED_FILES = {
    "/usr/bin/kafkad",
    "/usr/bin/kafkad-spark-ingest",
    "/usr/bin/kafkad-topics",
    "/etc/kafkad/server.properties",
    "/usr/lib/systemd/system/kafkad.service",
    "/usr/lib/systemd/system/kafkad-ingest.service",
    "/usr/lib/systemd/system/kafkad-ingest.timer",
    "/usr/lib/sysusers.d/kafkad.conf",
    "/usr/lib/tmpfiles.d/kafkad.conf",
    "/usr/lib/kafkad/site-packages/kafkad/__init__.py",
    "/usr/lib/kafkad/site-packages/kafkad/service/sdnotify.py",
}
BUNDLED = ("uvloop", "crc32c", "cramjam", "kazoo", "psutil", "prometheus_client")


def test_deb_metadata_and_contents(built: Built) -> None:
    fields = {
        name: _run("dpkg-deb", "-f", str(built.deb), name).stdout.strip()
        for name in ("Package", "Version", "Architecture", "Depends", "Recommends")
    }
    assert fields["Package"] == "kafkad"
    assert fields["Version"].startswith(VERSION)
    depends = [dep.strip() for dep in fields["Depends"].split(",")]
    assert "python3.11" in depends, depends  # the package owning /usr/bin/python3.11 on Debian/Ubuntu
    assert not any(dep.startswith("python3 ") for dep in depends), depends
    assert "python3-systemd" in fields["Recommends"]
    info = _run("dpkg-deb", "-I", str(built.deb)).stdout
    for script in ("postinst", "prerm", "postrm"):
        assert f" {script} " in info, info
    listing = _run("dpkg-deb", "-c", str(built.deb)).stdout
    paths = {line.split()[-1].lstrip(".") for line in listing.splitlines()}
    assert paths >= EXPECTED_FILES, EXPECTED_FILES - paths
    assert "/etc/kafkad/server.properties.d/" in paths
    for dep in BUNDLED:
        assert f"/usr/lib/kafkad/site-packages/{dep}/__init__.py" in paths, dep
    with tempfile.TemporaryDirectory() as control:
        _run("dpkg-deb", "-e", str(built.deb), control)
        assert Path(control, "conffiles").read_text().split() == ["/etc/kafkad/server.properties"]


def test_rpm_metadata_and_contents(built: Built) -> None:
    rpm = _ensure_debian_package("rpm", "rpm")
    info = _run(rpm, "-qip", str(built.rpm)).stdout
    assert "Name        : kafkad" in info
    assert f"Version     : {VERSION}" in info
    requires = _run(rpm, "-qpR", str(built.rpm)).stdout.splitlines()
    # A file dependency: RHEL/Rocky/Alma 9's python3 is 3.9 and CPython 3.11 is the separate
    # python3.11 package (as on Fedora); dnf resolves the file to it.
    assert "/usr/bin/python3.11" in requires, requires
    assert not any(req.startswith("python3 ") for req in requires), requires
    # python3-systemd on RHEL 9 is built for 3.9: no use to us, so not even recommended.
    assert "python3-systemd" not in _run(rpm, "-qp", "--recommends", str(built.rpm)).stdout
    files = set(_run(rpm, "-qlp", str(built.rpm)).stdout.splitlines())
    assert files >= EXPECTED_FILES, EXPECTED_FILES - files
    assert _run(rpm, "-qp", "--configfiles", str(built.rpm)).stdout.split() == [
        "/etc/kafkad/server.properties"
    ]
    scripts = _run(rpm, "-qp", "--scripts", str(built.rpm)).stdout
    assert "postinstall scriptlet" in scripts and "preuninstall scriptlet" in scripts


@pytest.fixture(scope="module")
def extracted(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deb-root")
    _run("dpkg-deb", "-x", str(built.deb), str(root))
    return root


def test_bundled_deps_import_on_python3_11(extracted: Path) -> None:
    """The extracted tree alone (no venv, no network) is enough for /usr/bin/python3.11."""
    site = extracted / "usr/lib/kafkad/site-packages"
    sys_abi = _run(
        "/usr/bin/python3.11", "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"
    )
    suffix = sys_abi.stdout.strip()
    extensions = [p for p in site.rglob("*.so") if not p.parent.name.endswith(".libs")]
    assert extensions
    assert all(p.name.endswith((suffix, ".abi3.so")) for p in extensions), extensions
    probe = "import " + ", ".join((*BUNDLED, "kafkad.service.metrics")) + "; print(uvloop.__file__)"
    result = subprocess.run(
        ["/usr/bin/python3.11", "-s", "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env={**CLEAN_ENV, "PYTHONPATH": str(site)},
        cwd=extracted,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(site))


# A stand-in python: answers the wrapper's isolated (-I) version probe as CPython 3.9 (RHEL 9's
# python3) and fails loudly if the wrapper runs kafkad on it anyway.
FAKE_PYTHON39 = """#!/bin/sh
if [ "$1" = -I ]; then echo "cpython 3.9"; exit 0; fi
echo "FAKE $0 ran kafkad" >&2
exit 3
"""


@dataclass(frozen=True, slots=True)
class Interpreters:
    """What /usr/bin holds in one scenario: the real 3.11 interpreter, the fake 3.9 one, or nothing."""

    python3_11: str | None
    python3: str | None
    runs: str | None  # the interpreter the wrappers must exec, None = they must refuse


# Wrappers whose entry point needs the central host's separately installed spark extra.
NEEDS_SPARK_EXTRA = {"kafkad-spark-ingest"}

SCENARIOS = {
    "rhel9-python3.11-package": Interpreters("real", "fake39", runs="/usr/bin/python3.11"),
    "python3-is-3.11": Interpreters(None, "real", runs="/usr/bin/python3"),
    "python3-is-3.9-only": Interpreters(None, "fake39", runs=None),
    "no-python": Interpreters(None, None, runs=None),
}


def _fake_usr_bin(directory: Path, interpreters: Interpreters) -> Path:
    directory.mkdir()
    shutil.copy2(os.path.realpath("/bin/sh"), directory / "sh")  # the wrappers' #!/bin/sh
    for name, kind in (("python3.11", interpreters.python3_11), ("python3", interpreters.python3)):
        if kind == "real":
            shutil.copy2(os.path.realpath("/usr/bin/python3.11"), directory / name)
        elif kind == "fake39":
            (directory / name).write_text(FAKE_PYTHON39)
            (directory / name).chmod(0o755)
    return directory


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_wrappers_pick_cpython_3_11(extracted: Path, tmp_path: Path, scenario: str) -> None:
    assert os.geteuid() == 0, "a private mount namespace over /usr/bin needs root"
    interpreters = SCENARIOS[scenario]
    fake_bin = _fake_usr_bin(tmp_path / "usr-bin", interpreters)
    wrappers = sorted((extracted / "usr/bin").iterdir())
    assert {w.name for w in wrappers} >= {"kafkad", "kafkad-topics", "kafkad-spark-ingest"}
    # The bundled tree is not installed here: the extracted one rides on the PYTHONPATH the wrapper
    # appends after /usr/lib/kafkad/site-packages.
    env = {**CLEAN_ENV, "PYTHONPATH": str(extracted / "usr/lib/kafkad/site-packages")}
    for wrapper in wrappers:
        result = subprocess.run(
            [
                "unshare", "--mount", "--", "/bin/sh", "-c",
                'mount --bind "$1" /usr/bin && shift && exec "$@"',
                "sh", str(fake_bin), str(wrapper), "--help",
            ],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
        )  # fmt: skip
        name = wrapper.name
        assert "FAKE" not in result.stderr, (name, result.stderr)
        if interpreters.runs is None:
            found = "cpython 3.9" if interpreters.python3 else "missing or broken"
            assert result.returncode == 1, (name, result)
            assert result.stderr == (
                f"{name}: needs CPython 3.11: /usr/bin/python3.11 is missing and /usr/bin/python3 is "
                f"{found}; install the python3.11 package\n"
            )
            assert result.stdout == ""
        elif name in NEEDS_SPARK_EXTRA:
            # Its entry point imports pyarrow/pyspark, which the package does not bundle: reaching
            # that import from the bundled tree shows the wrapper ran it on the real interpreter.
            assert "No module named 'pyarrow'" in result.stderr, (name, result.stderr)
            assert f"{extracted}/usr/lib/kafkad/site-packages/kafkad/" in result.stderr
        else:
            # argparse's usage line shows the wrapper's name: the entry point really ran.
            assert result.returncode == 0, (name, result.stderr)
            assert result.stdout.startswith(f"usage: {name} "), (name, result.stdout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NotifyListener:
    """Our stand-in for systemd's NOTIFY_SOCKET: collects every datagram in a thread."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "notify.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        os.chmod(self.path, 0o777)  # the broker runs as the kafkad user
        self.sock.settimeout(0.2)
        self.messages: list[str] = []
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            with self._cond:
                self.messages.extend(data.decode().split("\n"))
                self._cond.notify_all()

    def wait_for(self, assignment: str, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: assignment in self.messages, timeout)

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


@pytest.fixture
def installed(built: Built) -> Iterator[Path]:
    assert os.geteuid() == 0, "installing the .deb needs root"
    _run("dpkg", "-i", str(built.deb), timeout=300)
    try:
        yield built.deb
    finally:
        _run("dpkg", "-r", "kafkad", timeout=300, check=False)


def test_install_run_round_trip_and_remove_keeps_data(installed: Path) -> None:
    # What postinstall must leave behind.
    assert _run("getent", "passwd", "kafkad").stdout.startswith("kafkad:")
    for d in ("/var/lib/kafkad", "/var/lib/kafkad/data", "/var/log/kafkad"):
        st = os.stat(d)
        assert st.st_uid == int(_run("id", "-u", "kafkad").stdout) and (st.st_mode & 0o777) == 0o750, d
    assert Path("/etc/kafkad/server.properties.d").is_dir()
    # The installed units verify now that their binaries exist.
    units = [
        f"/usr/lib/systemd/system/{u}"
        for u in ("kafkad.service", "kafkad-ingest.service", "kafkad-ingest.timer")
    ]
    verify = _run("systemd-analyze", "verify", *units, check=False)
    assert verify.returncode == 0, verify.stderr

    work = Path(tempfile.mkdtemp(prefix="kafkad-pkg-"))
    os.chmod(work, 0o755)
    data = Path("/var/lib/kafkad") / f"pkgtest-{uuid.uuid4().hex[:8]}"
    data.mkdir(mode=0o750)
    shutil.chown(data, "kafkad", "kafkad")
    port, metrics_port = _free_port(), _free_port()
    config = work / "server.properties"
    config.write_text(
        "broker.id=0\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={data}\n"
        "num.partitions=1\nauto.create.topics.enable=true\noffsets.topic.replication.factor=1\n"
        f"metrics.listeners=http://127.0.0.1:{metrics_port}\n"
    )
    config.chmod(0o644)
    notify = NotifyListener(work)
    log_path = work / "kafkad.log"
    env = {**CLEAN_ENV, "NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "1000000"}
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(
            [
                "setpriv",
                "--reuid=kafkad",
                "--regid=kafkad",
                "--init-groups",
                "--",
                "/usr/bin/kafkad",
                "--config",
                str(config),
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            cwd="/",
        )
    # Appliance contract checks (sd_notify, metrics wiring) are collected and asserted at the end, so
    # the round trip and the removal are exercised even when one of them is missing.
    problems: list[str] = []
    try:
        if not notify.wait_for("READY=1", 30):
            problems.append(f"no READY=1 on NOTIFY_SOCKET within 30 s (got {notify.messages})")
            assert _wait_port(port, proc, 30), (
                f"broker not listening (exit={proc.poll()}): {log_path.read_text()}"
            )
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        if cmdline[0] != b"/usr/bin/python3.11":
            problems.append(f"the wrapper exec'd {cmdline[0]!r}, not /usr/bin/python3.11")
        _round_trip(port)
        problems += _check_ops_endpoint(metrics_port)
        if not notify.wait_for("WATCHDOG=1", 5):
            problems.append("no WATCHDOG=1 although WATCHDOG_USEC=1000000")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, log_path.read_text()[-4000:]
        if "STOPPING=1" not in notify.messages:
            problems.append("no STOPPING=1 on SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        notify.close()

    assert (data / "pkg-test-0").is_dir()
    _run("dpkg", "-r", "kafkad", timeout=300)
    assert not Path("/usr/bin/kafkad").exists()
    assert (data / "pkg-test-0").is_dir(), "package removal must keep the data"
    assert Path("/var/lib/kafkad/data").is_dir()
    shutil.rmtree(data)
    shutil.rmtree(work)
    assert not problems, "\n".join(problems)


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.2)  # polling a real process we do not control; bounded by the deadline
    return False


def _check_ops_endpoint(metrics_port: int) -> list[str]:
    base = f"http://127.0.0.1:{metrics_port}"
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as r:
            healthy = r.status == 200
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError as e:
        return [f"metrics.listeners endpoint {base} not served: {e}"]
    problems = [] if healthy else ["/healthz not 200 while serving"]
    if 'kafka_server_brokertopicmetrics_messagesin_total{topic="pkg-test"} 20.0' not in text:
        problems.append("/metrics lacks messagesin_total{topic=pkg-test} == 20")
    return problems


def _round_trip(port: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap = f"127.0.0.1:{port}"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    sent = [f"message-{i}".encode() for i in range(20)]
    for i, value in enumerate(sent):
        producer.produce("pkg-test", value=value, key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pkg-test", "enable.auto.commit": False})
    consumer.assign([TopicPartition("pkg-test", 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            payload = msg.value()
            assert payload is not None
            got.append(payload)
    finally:
        consumer.close()
    assert got == sent
