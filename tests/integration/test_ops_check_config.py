"""`kafkad --check-config`: every effective value with its source (file:line, drop-in:line, override, default).

Runs the real command line (`python -m kafkad.service.main`) on a server.properties with a `.d/` drop-in dir.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration


def _check_config(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafkad.service.main", "--check-config", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _effective(stdout: str) -> dict[str, tuple[str, str]]:
    """`key=value  # source` lines -> key: (value, source)."""
    out: dict[str, tuple[str, str]] = {}
    for line in stdout.splitlines():
        setting, _, source = line.partition("  # ")
        key, _, value = setting.partition("=")
        out[key] = (value, source)
    return out


@pytest.fixture()
def config(tmp_path: Path) -> Path:
    main = tmp_path / "server.properties"
    main.write_text(
        "# the appliance's base config\n"
        f"log.dirs={tmp_path / 'data'}\n"
        "num.partitions=2\n"
        "log.retention.hours=24\n"
        "listeners=PLAINTEXT://127.0.0.1:9092\n"
    )
    dropin = tmp_path / "server.properties.d"
    dropin.mkdir()
    (dropin / "10-site.properties").write_text("\nnum.partitions=4\nlog.segment.bytes=1048576\n")
    (dropin / "20-disk.properties").write_text("log.dirs.min.free.percent=15\n")
    (dropin / "README").write_text("num.partitions=99\n")  # not *.properties: ignored
    return main


def test_sources_of_effective_values(config: Path) -> None:
    dropin = config.with_name("server.properties.d")
    r = _check_config("--config", str(config), "--override", "log.segment.bytes=2097152")
    assert r.returncode == 0, r.stderr
    eff = _effective(r.stdout)
    assert eff["log.dirs"] == (str(config.parent / "data"), f"{config}:2")
    assert eff["log.retention.hours"] == ("24", f"{config}:4")
    assert eff["num.partitions"] == ("4", f"{dropin / '10-site.properties'}:2")  # drop-in beats the file
    assert eff["log.dirs.min.free.percent"] == ("15.0", f"{dropin / '20-disk.properties'}:1")
    assert eff["log.segment.bytes"] == ("2097152", "override")  # override beats the drop-in
    assert eff["message.max.bytes"][1] == "default"
    assert len(eff) > 50  # every key of the table, not just the ones set
    assert r.stderr == ""


def test_bad_value_names_file_line_and_key(config: Path) -> None:
    dropin = config.with_name("server.properties.d")
    (dropin / "30-bad.properties").write_text("# a typo'd number\nlog.retention.check.interval.ms=5m\n")
    r = _check_config("--config", str(config))
    assert r.returncode != 0
    assert r.stdout == ""
    assert f"{dropin / '30-bad.properties'}:2: log.retention.check.interval.ms: " in r.stderr, r.stderr
    assert "'5m'" in r.stderr

    (dropin / "30-bad.properties").write_text("log.dirs.min.free.percent=150\n")
    r = _check_config("--config", str(config))
    assert r.returncode != 0
    assert f"{dropin / '30-bad.properties'}:1: log.dirs.min.free.percent: " in r.stderr, r.stderr

    (dropin / "30-bad.properties").unlink()
    r = _check_config("--config", str(config), "--override", "num.partitions=many")
    assert r.returncode != 0
    assert "--override" in r.stderr and "num.partitions" in r.stderr, r.stderr


def test_unknown_key_warns_with_suggestion(config: Path) -> None:
    with open(config, "a") as f:
        f.write("log.retention.hour=12\n")
    r = _check_config("--config", str(config))
    assert r.returncode == 0, r.stderr
    assert (
        f"{config}:6: unknown key 'log.retention.hour' ignored (did you mean log.retention.hours?)"
        in r.stderr
    )
    eff = _effective(r.stdout)
    assert eff["log.retention.hours"] == ("24", f"{config}:4")
    assert "log.retention.hour" not in eff


def test_broker_id_minus_one_is_generated_once_and_kept(tmp_path: Path) -> None:
    def metadata_broker_id(port: int) -> int:
        raw = Raw(port)
        try:
            md = raw.call(3, 8, {"topics": [], "allow_auto_topic_creation": False})
        finally:
            raw.close()
        ids = {int(b["node_id"]) for b in md["brokers"]}
        assert len(ids) == 1 and md["controller_id"] in ids
        return ids.pop()

    with BrokerProcess(tmp_path / "gen", {"broker.id": "-1"}) as broker:
        first = metadata_broker_id(broker.port)
        assert first >= 1001  # reserved.broker.max.id + 1, as Kafka generates
        meta = (broker.data_dir / "meta.properties").read_text()
        assert f"broker.id={first}" in meta
        broker.stop()
        broker.start()
        assert metadata_broker_id(broker.port) == first


def test_taken_port_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        config = tmp_path / "server.properties"
        config.write_text(
            f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'data'}\nbroker.id=0\n"
        )
        proc = subprocess.run(
            [sys.executable, "-m", "kafkad.service.main", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 1
    assert "address already in use" in proc.stderr.lower()
    assert "Traceback" not in proc.stderr, proc.stderr
