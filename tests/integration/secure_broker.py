"""A kafkad with every kind of listener, for the security tests: PLAINTEXT, SSL, MTLS (SSL with required
client certificates), SASL_PLAINTEXT and SASL_SSL (PLAIN users from the JAAS entry, SCRAM users made with
kafkad-configs). Certificates come from tests/integration/pki.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.pki import Pki, make_pki

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_USERS = {"bob": "bob-secret", "admin": "admin-secret"}


@dataclass
class SecureBroker:
    broker: BrokerProcess
    pki: Pki
    ports: dict[str, int]

    def conf(self, listener: str, **extra: str) -> dict[str, str]:
        """confluent-kafka settings for a listener (librdkafka names)."""
        proto = {"MTLS": "SSL"}.get(listener, listener)
        c = {"bootstrap.servers": f"127.0.0.1:{self.ports[listener]}", "security.protocol": proto}
        if "SSL" in proto:
            c["ssl.ca.location"] = str(self.pki.ca)
        c.update(extra)
        return c


def listener_overrides(pki: Pki, ports: Mapping[str, int]) -> dict[str, str]:
    return {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
    }


def start_secure(base: Path, extra: Mapping[str, str] | None = None) -> SecureBroker:
    pki = make_pki(base / "pki")
    names = ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")
    ports = {n: free_port() for n in names}
    b = BrokerProcess(
        base / "kafkad",
        {**listener_overrides(pki, ports), "num.partitions": "2", **(extra or {})},
        port=ports["PLAINTEXT"],
    )
    b.start()
    sb = SecureBroker(b, pki, ports)
    for user, password in SCRAM_USERS.items():
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            configs(
                sb,
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                user,
                "--add-config",
                f"{mech}=[iterations=4096,password={password}]",
            )
    return sb


def configs(
    sb: SecureBroker, *args: str, listener: str = "PLAINTEXT", command_config: Path | None = None
) -> str:
    cmd = [
        sys.executable,
        "-m",
        "kafkad.tools.configs",
        "--bootstrap-server",
        f"127.0.0.1:{sb.ports[listener]}",
    ]
    if command_config is not None:
        cmd += ["--command-config", str(command_config)]
    r = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr + r.stdout
    return r.stdout
