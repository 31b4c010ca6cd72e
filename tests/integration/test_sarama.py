"""Issue 23 item 4: sarama (Go; Debian's golang-github-shopify-sarama-dev 1.22, built offline in GOPATH
mode) against kafkad, configured for Kafka 2.1.0 (Burrow's usual kafka-version) and 2.2.0 (this sarama's
newest): admin create/list topics, produce, consume in a group, the group's offsets through the admin
client, the log ends through ListOffsets. Configured for 0.10.0.0 it reads offsets as Burrow does
(ListOffsets v0, OffsetFetch v1): the case that logged "unsupported api key 2 version 0" before.
(Its admin client needs 0.10.1+/0.11+ for CreateTopics/DescribeConfigs, so the 0.10 run reads offsets only;
kafka-python covers 0.10's produce and fetch, test_old_clients.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).with_name("sarama")
GOPATH_SYSTEM = "/usr/share/gocode"  # Debian's Go packages


@pytest.fixture(scope="module")
def sarama_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    assert go, "go is required (Debian golang-go; make deb-deps installs it)"
    assert Path(GOPATH_SYSTEM, "src/github.com/Shopify/sarama").is_dir(), (
        "sarama is required (Debian golang-github-shopify-sarama-dev)"
    )
    work = tmp_path_factory.mktemp("sarama-build")
    out = work / "sarama_check"
    env = dict(
        os.environ,
        GOPATH=f"{work}:{GOPATH_SYSTEM}",
        GO111MODULE="off",  # offline: Debian's sources, no module proxy
        GOCACHE=str(work / "cache"),
    )
    subprocess.run([go, "build", "-o", str(out), "."], cwd=SOURCE, env=env, check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("kafkad-sarama")) as b:
        yield b
        log = b.log_text()
        assert "ERROR" not in log and "Traceback" not in log
        assert "unsupported api" not in log, log


def _run(binary: Path, broker: BrokerProcess, version: str, name: str) -> None:
    args = [str(binary), broker.bootstrap, version, name, name, "20"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (version, r.stdout, r.stderr[-2000:])


@pytest.mark.parametrize("version", ["2.1.0", "2.2.0"])
def test_sarama_produce_consume_group_offsets_admin(
    sarama_check: Path, broker: BrokerProcess, version: str
) -> None:
    _run(sarama_check, broker, version, "sarama-" + version.replace(".", "-"))


def test_sarama_0_10_reads_offsets_like_burrow(sarama_check: Path, broker: BrokerProcess) -> None:
    _run(sarama_check, broker, "2.1.0", "sarama-burrow")  # a group that committed 20 offsets
    args = [str(sarama_check), broker.bootstrap, "0.10.0.0", "sarama-burrow", "sarama-burrow", "20"]
    r = subprocess.run([*args, "offsets-only"], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.stdout, r.stderr[-2000:])
