"""Dynamic broker configs: Kafka's precedence, the local store, the refusal of restart-only keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.config.broker_config import Origin, build_config
from kafkad.config.defs import ConfigSource
from kafkad.config.dynamic import (
    DEFAULT_ENTITY,
    DYNAMIC_KEYS,
    LocalDynamicConfigStore,
    check_keys,
    layered,
)
from kafkad.protocol import ErrorCode, KafkaError

FILE = Origin(ConfigSource.FILE, "server.properties", 1)


def test_broker_value_beats_default_beats_file() -> None:
    static = build_config(
        [("listeners", "PLAINTEXT://127.0.0.1:9092", FILE), ("log.retention.ms", "1000", FILE)]
    )
    assert static.storage.topic_defaults["retention.ms"] == "1000"
    default_only = layered(static, {DEFAULT_ENTITY: {"log.retention.ms": "2000"}}, 0)
    assert default_only.storage.topic_defaults["retention.ms"] == "2000"
    assert default_only.settings["log.retention.ms"].origin.source is ConfigSource.DYNAMIC_DEFAULT
    both = layered(
        static, {DEFAULT_ENTITY: {"log.retention.ms": "2000"}, "0": {"log.retention.ms": "3000"}}, 0
    )
    assert both.storage.topic_defaults["retention.ms"] == "3000"
    assert both.settings["log.retention.ms"].origin.source is ConfigSource.DYNAMIC_BROKER
    other_broker = layered(static, {"5": {"log.retention.ms": "3000"}}, 0)
    assert other_broker.storage.topic_defaults["retention.ms"] == "1000"
    # layering starts from the static config every time: removing a dynamic value restores the file's
    assert layered(static, {}, 0).storage.topic_defaults["retention.ms"] == "1000"
    assert static.settings["listeners"].text == both.settings["listeners"].text


def test_store_round_trip(tmp_path: Path) -> None:
    store = LocalDynamicConfigStore.in_dir(str(tmp_path))
    assert store.load() == {}
    store.save(DEFAULT_ENTITY, {"log.retention.ms": "5"})
    store.save("0", {"log.cleaner.backoff.ms": "100"})
    assert LocalDynamicConfigStore.in_dir(str(tmp_path)).load() == {
        DEFAULT_ENTITY: {"log.retention.ms": "5"},
        "0": {"log.cleaner.backoff.ms": "100"},
    }
    store.save("0", {})
    assert store.load() == {DEFAULT_ENTITY: {"log.retention.ms": "5"}}
    assert not list(tmp_path.glob("*.tmp"))


def test_restart_only_and_unknown_keys_refused() -> None:
    assert {"log.retention.ms", "log.dirs.max.bytes", "bridge.rate.limit.bytes.per.sec"} <= DYNAMIC_KEYS
    assert "log.dirs" not in DYNAMIC_KEYS and "listeners" not in DYNAMIC_KEYS
    check_keys({"log.retention.bytes": "1"})
    with pytest.raises(KafkaError) as e:
        check_keys({"log.dirs": "/x", "listeners": "PLAINTEXT://:1"})
    assert e.value.code is ErrorCode.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(listeners, log.dirs)" in e.value.message
    with pytest.raises(KafkaError) as e:
        check_keys({"log.retnetion.ms": "1"})
    assert e.value.code is ErrorCode.INVALID_CONFIG


def test_kafka_only_names_are_accepted_type_checked_and_kept_out_of_the_table() -> None:
    """Kafka's dynamic broker names kafkad has no use for (sasl.kerberos.*, num.io.threads, ...) pass,
    with Kafka's type check and its per-broker-only rule, and never reach build_config."""
    check_keys({"sasl.kerberos.min.time.before.relogin": "58000", "num.io.threads": "4"})
    check_keys({"log.cleaner.threads": "2", "max.connections": "100"}, cluster_default=True)
    for configs, code, words in (
        ({"sasl.kerberos.min.time.before.relogin": "soon"}, ErrorCode.INVALID_CONFIG, "Not a long"),
        ({"log.preallocate": "maybe"}, ErrorCode.INVALID_CONFIG, "Not a boolean"),
        ({"num.io.threads": str(2**31)}, ErrorCode.INVALID_CONFIG, "Not a int"),
    ):
        with pytest.raises(KafkaError) as e:
            check_keys(configs)
        assert e.value.code is code and words in e.value.message
    with pytest.raises(KafkaError) as e:
        check_keys({"sasl.kerberos.min.time.before.relogin": "58000"}, cluster_default=True)
    assert e.value.code is ErrorCode.INVALID_REQUEST and "broker id must be specified" in e.value.message
    static = build_config([("listeners", "PLAINTEXT://127.0.0.1:9092", FILE)])
    config = layered(static, {"0": {"sasl.kerberos.min.time.before.relogin": "58000"}}, 0)
    assert "sasl.kerberos.min.time.before.relogin" not in config.settings and not config.warnings
