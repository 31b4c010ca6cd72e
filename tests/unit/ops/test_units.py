"""The systemd units and sysusers/tmpfiles entries: `systemd-analyze verify` and the settings ops rely on."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

SYSTEMD = Path(__file__).resolve().parents[3] / "systemd"
UNITS = ("kafkad.service", "kafkad-ingest.service", "kafkad-ingest.timer")


def _unit(name: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(SYSTEMD / name)
    return parser


def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is required (Debian package systemd)"
    # /usr/bin/kafkad* exist only once the package is installed: verify copies that run /bin/true.
    for name in UNITS:
        text = (SYSTEMD / name).read_text()
        lines = [
            "ExecStart=/bin/true" if line.startswith("ExecStart=/usr/bin/kafkad") else line
            for line in text.splitlines()
        ]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        [analyze, "verify", *(str(tmp_path / n) for n in UNITS)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "kafkad" not in result.stderr, result.stderr  # no warnings about our units either


def test_broker_unit_settings() -> None:
    svc = _unit("kafkad.service")["Service"]
    assert svc["Type"] == "notify"
    assert svc["User"] == "kafkad"
    assert svc["ExecStart"] == "/usr/bin/kafkad --config /etc/kafkad/server.properties"
    assert svc["WatchdogSec"] == "30s"
    assert svc["Restart"] == "on-failure"
    assert svc["LimitNOFILE"] == "100000"
    assert svc["ProtectSystem"] == "strict"
    assert svc["ReadWritePaths"].split() == ["/var/lib/kafkad", "/var/log/kafkad"]
    assert svc["RestrictAddressFamilies"].split() == ["AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"]
    assert svc["CapabilityBoundingSet"] == ""
    assert svc["NoNewPrivileges"] == "true"
    assert int(svc["TimeoutStopSec"].rstrip("s")) >= 60  # flush + checkpoints on SIGTERM


def test_ingest_timer_runs_the_ingest_service_nightly() -> None:
    timer = _unit("kafkad-ingest.timer")["Timer"]
    assert timer["Unit"] == "kafkad-ingest.service"
    assert timer["OnCalendar"].endswith("02:30:00")
    assert _unit("kafkad-ingest.service")["Service"]["ExecStart"] == (
        "/usr/bin/kafkad-spark-ingest --landing /srv/kafkad/landing --output /srv/kafkad/warehouse"
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kafkad.sysusers", [["u", "kafkad", "-"]]),
        ("kafkad.tmpfiles", [["d", "/var/lib/kafkad", "0750", "kafkad", "kafkad"]]),
    ],
)
def test_sysusers_and_tmpfiles_entries(name: str, expected: list[list[str]]) -> None:
    entries = [
        line.split()
        for line in (SYSTEMD / name).read_text().splitlines()
        if line and not line.startswith("#")
    ]
    for want in expected:
        assert any(e[: len(want)] == want for e in entries), entries
