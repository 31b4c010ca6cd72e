"""The ingest job on a real Spark standalone cluster (master + 2 workers on loopback), via spark-submit."""

from __future__ import annotations

import queue
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from kafkad.spark_bridge.ingest import read_ledger
from tests.spark.conftest import spark_env
from tests.spark.helpers import expected_rows, make_shipper, parquet_rows, write_logs

pytestmark = pytest.mark.spark
SPARK_HOME = Path(pyspark.__file__).parent
REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Daemon:
    """A spark-class process whose log lines are watched for a readiness message."""

    def __init__(self, args: list[str], ready: str, log: Path) -> None:
        env = spark_env()
        env["SPARK_HOME"] = str(SPARK_HOME)
        self.proc = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._ready = ready
        self._events: queue.Queue[bool] = queue.Queue()
        self._log = log
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with open(self._log, "wb") as out:
            for line in self.proc.stdout:
                out.write(line)
                out.flush()
                if self._ready.encode() in line:
                    self._events.put(True)
        self._events.put(False)  # exited

    def wait_ready(self, timeout_s: float = 300) -> None:
        try:
            ok = self._events.get(timeout=timeout_s)
        except queue.Empty:
            ok = False
        assert ok, f"spark daemon not ready; log:\n{self._log.read_text()[-3000:]}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    daemons = []
    try:
        master = _Daemon(
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(_free_port()),
            ],
            "I have been elected leader",
            tmp_path / "master.log",
        )
        daemons.append(master)
        master.wait_ready()
        for i in range(2):
            work = tmp_path / f"worker{i}"
            work.mkdir()
            w = _Daemon(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(_free_port()),
                    "--work-dir",
                    str(work),
                ],
                "Successfully registered with master",
                tmp_path / f"worker{i}.log",
            )
            daemons.append(w)
        for w in daemons[1:]:
            w.wait_ready()
        yield master_url
    finally:
        for d in reversed(daemons):
            d.stop()


@pytest.mark.timeout(1500)  # three JVMs start, then spark-submit (up to 900 s on a loaded machine)
def test_ingest_via_spark_submit_on_standalone_cluster(tmp_path: Path, cluster: str) -> None:
    logs, landing, output = tmp_path / "logs", tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    expected = expected_rows(write_logs(logs))
    make_shipper(logs, landing).run_once()
    env = spark_env()
    env["SPARK_HOME"] = str(SPARK_HOME)
    proc = subprocess.run(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            cluster,
            "--conf",
            "spark.executor.memory=512m",
            "--conf",
            "spark.ui.enabled=false",
            str(REPO / "kafkad" / "spark_bridge" / "ingest.py"),
            "--landing",
            str(landing),
            "--output",
            str(output),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    stdout = proc.stdout.decode()
    assert "TOTAL" in stdout and "orders" in stdout, stdout
    # both workers ran executors of this application
    for i in range(2):
        assert "Asked to launch executor app-" in (tmp_path / f"worker{i}.log").read_text()
    assert parquet_rows(output) == expected
    assert len(read_ledger(output)) == 5
