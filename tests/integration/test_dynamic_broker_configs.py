"""Broker-level dynamic configs (issue 15 item 3): `kafkad-configs --entity-type brokers [--entity-default]
--alter` and AdminClient.incremental_alter_configs on BROKER resources change the live keys at once, win
over server.properties (this broker's value > the cluster-wide default > the file), survive a restart, and
keys that need a restart are refused as Kafka refuses them."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import Rec, create_topics, produce_confluent
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

STATIC_RETENTION_MS = "604800000"  # in server.properties: a week
BROKER_0 = ("--entity-type", "brokers", "--entity-name", "0")


@pytest.fixture()
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    overrides = {"log.retention.check.interval.ms": "200", "log.retention.ms": STATIC_RETENTION_MS}
    with BrokerProcess(tmp_path / "kafkad", overrides) as b:
        yield b


def configs_tool(bootstrap: str, *argv: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "kafkad.tools.configs", "--bootstrap-server", bootstrap, *argv],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def _describe(admin: Any, rtype: Any, name: str) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

    (fut,) = admin.describe_configs([ConfigResource(rtype, name)]).values()
    return dict(fut.result(30))


def _log_start(port: int, topic: str) -> int:
    raw = Raw(port)
    try:
        resp = raw.call(
            2,
            1,
            {
                "replica_id": -1,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}],
            },
        )
    finally:
        raw.close()
    return int(resp["topics"][0]["partitions"][0]["offset"])


def test_broker_default_retention_applies_live_wins_over_the_file_and_survives_restart(
    broker: BrokerProcess,
) -> None:
    from confluent_kafka.admin import AdminClient, ResourceType  # type: ignore[attr-defined]

    bootstrap = broker.bootstrap
    topic = f"dyn-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, {topic: 1}, {topic: {"segment.bytes": "1024"}})  # many small segments
    recs = [Rec(0, None, b"x" * 200, (), 0) for _ in range(60)]
    produce_confluent(bootstrap, topic, recs, {"batch.num.messages": 1, "linger.ms": 0})
    assert _log_start(broker.port, topic) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = _describe(admin, ResourceType.TOPIC, topic)["retention.ms"]
    assert described.value == STATIC_RETENTION_MS and described.source == 4  # STATIC_BROKER_CONFIG

    # The cluster-wide default: every closed segment is past a 1 ms retention, deleted by the next pass.
    start = time.monotonic()
    out = configs_tool(
        bootstrap,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.ms=1",
    )
    assert out.stdout.strip() == "Completed updating default config for brokers in the cluster."
    deadline = time.monotonic() + 30
    while _log_start(broker.port, topic) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    took = time.monotonic() - start
    assert _log_start(broker.port, topic) > 0, "the dynamic retention was not applied"
    print(f"dynamic log.retention.ms applied, segments deleted after {took * 1000:.0f} ms")
    described = _describe(admin, ResourceType.TOPIC, topic)["retention.ms"]
    assert described.value == "1" and described.source == 3, described  # DYNAMIC_DEFAULT_BROKER_CONFIG

    # This broker's own value wins over the default.
    configs_tool(bootstrap, "--alter", *BROKER_0, "--add-config", "log.retention.ms=86400000")
    described = _describe(admin, ResourceType.TOPIC, topic)["retention.ms"]
    assert described.value == "86400000" and described.source == 2, described  # DYNAMIC_BROKER_CONFIG
    shown = configs_tool(bootstrap, "--describe", "--entity-type", "brokers", "--entity-default").stdout
    assert "log.retention.ms=1 " in shown, shown

    # Kept across a restart, still over server.properties.
    broker.restart()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert _describe(admin, ResourceType.TOPIC, topic)["retention.ms"].value == "86400000"
    broker_rows = _describe(admin, ResourceType.BROKER, "0")
    assert broker_rows["log.retention.ms"].value == "86400000"
    assert not broker_rows["log.retention.ms"].is_read_only and broker_rows["log.dirs"].is_read_only
    # Deleting the broker's value falls back to the default, then to the file.
    configs_tool(bootstrap, "--alter", *BROKER_0, "--delete-config", "log.retention.ms")
    assert _describe(admin, ResourceType.TOPIC, topic)["retention.ms"].value == "1"
    configs_tool(
        bootstrap,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--delete-config",
        "log.retention.ms",
    )
    assert _describe(admin, ResourceType.TOPIC, topic)["retention.ms"].value == STATIC_RETENTION_MS


def test_incremental_alter_broker_configs_and_restart_keys_refused(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def alter(name: str, *entries: tuple[str, str | None, AlterConfigOpType]) -> None:
        res = ConfigResource(
            ResourceType.BROKER,
            name,
            incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries],
        )
        (fut,) = admin.incremental_alter_configs([res]).values()
        fut.result(30)

    alter(
        "0",
        ("log.cleaner.backoff.ms", "2500", AlterConfigOpType.SET),
        ("log.cleanup.policy", "compact", AlterConfigOpType.APPEND),
        ("bridge.rate.limit.bytes.per.sec", "1048576", AlterConfigOpType.SET),
        ("log.dirs.max.bytes", "10000000000", AlterConfigOpType.SET),
    )
    rows = _describe(admin, ResourceType.BROKER, "0")
    assert rows["log.cleaner.backoff.ms"].value == "2500" and rows["log.cleaner.backoff.ms"].source == 2
    assert rows["log.cleanup.policy"].value == "delete,compact"
    assert rows["log.dirs.max.bytes"].value == "10000000000"
    alter("0", ("log.cleanup.policy", None, AlterConfigOpType.DELETE))
    assert _describe(admin, ResourceType.BROKER, "0")["log.cleanup.policy"].value == "delete"

    for key, value, pattern in (
        ("log.dirs", "/elsewhere", "Cannot update these configs dynamically"),
        ("num.partitions", "7", "Cannot update these configs dynamically"),
        ("log.retention.ms", "soon", "log.retention.ms"),
        ("no.such.key", "1", "Unknown broker config"),
    ):
        with pytest.raises(Exception, match=pattern):
            alter("0", (key, value, AlterConfigOpType.SET))
    raw = Raw(broker.port)  # another broker's id (librdkafka would send it to that broker)
    try:
        resp = raw.call(
            44,
            0,
            {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": "7",
                        "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "1"}],
                    }
                ],
                "validate_only": False,
            },
        )
    finally:
        raw.close()
    (r,) = resp["responses"]
    assert r["error_code"] == 42 and "Unexpected broker id" in r["error_message"], r  # INVALID_REQUEST
    # the tool reports the refusal in Kafka's words and exits non-zero
    out = configs_tool(
        broker.bootstrap,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "0",
        "--add-config",
        "log.dirs=/x",
        ok=False,
    )
    assert out.returncode != 0 and "Cannot update these configs dynamically: Set(log.dirs)" in out.stderr
    # nothing refused was stored: a restart comes back with the accepted values only
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    rows = _describe(admin, ResourceType.BROKER, "0")
    assert rows["log.cleaner.backoff.ms"].value == "2500" and rows["log.dirs"].source == 4


def test_kafka_broker_names_kafkad_does_not_use_are_stored_and_described(broker: BrokerProcess) -> None:
    """confluent-kafka's incremental_alter_configs with Kafka broker names kafkad has no use for
    (sasl.kerberos.min.time.before.relogin, as librdkafka's admin tests send): accepted and stored as Kafka
    does, described with their dynamic source, kept across a restart, deleted back to Kafka's default."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    def alter(name: str, *entries: tuple[str, str | None, Any]) -> None:
        res = ConfigResource(
            ResourceType.BROKER,
            name,
            incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries],
        )
        (fut,) = admin.incremental_alter_configs([res]).values()
        fut.result(30)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    relogin = "sasl.kerberos.min.time.before.relogin"
    assert _describe(admin, ResourceType.BROKER, "0")[relogin].value == "60000"  # Kafka's default
    alter(
        "0",
        (relogin, "58000", AlterConfigOpType.SET),
        ("sasl.kerberos.principal.to.local.rules", "RULE:x", AlterConfigOpType.APPEND),
    )
    default = ("--entity-type", "brokers", "--entity-default", "--alter", "--add-config")
    configs_tool(broker.bootstrap, *default, "num.io.threads=4")
    rows = _describe(admin, ResourceType.BROKER, "0")
    assert (rows[relogin].value, rows[relogin].source) == ("58000", 2)  # DYNAMIC_BROKER_CONFIG
    assert rows["sasl.kerberos.principal.to.local.rules"].value == "DEFAULT,RULE:x"
    assert (rows["num.io.threads"].value, rows["num.io.threads"].source) == ("4", 3)  # DYNAMIC_DEFAULT
    with pytest.raises(Exception, match="Not a long"):
        alter("0", (relogin, "soon", AlterConfigOpType.SET))
    out = configs_tool(broker.bootstrap, *default, f"{relogin}=1", ok=False)
    assert out.returncode != 0 and "broker id must be specified" in out.stderr
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _describe(admin, ResourceType.BROKER, "0")[relogin].value == "58000"
    alter("0", (relogin, None, AlterConfigOpType.DELETE))
    rows = _describe(admin, ResourceType.BROKER, "0")
    assert (rows[relogin].value, rows[relogin].source) == ("60000", 5)  # DEFAULT_CONFIG
    assert "ERROR" not in broker.log_text(since_start=False)
