from pathlib import Path

import pytest

from kafkad.config.broker_config import ConfigError, load_config
from kafkad.config.defs import ConfigSource
from kafkad.config.docs import check_config_lines, describe_broker, render_markdown
from kafkad.config.table import KEYS
from kafkad.protocol.config_resources import DescribeConfigSource as DescribeSource


def write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_defaults_without_file() -> None:
    cfg = load_config(None)
    assert cfg.server.broker_id == -1  # generated once at start and kept in meta.properties
    assert cfg.standalone
    assert cfg.server.listeners[0].port == 9092
    assert cfg.storage.topic_defaults["retention.ms"] == str(168 * 3_600_000)
    assert cfg.socket.request_max_bytes == 104857600
    assert cfg.log_config().retention_ms == 168 * 3_600_000


def test_retention_precedence(tmp_path: Path) -> None:
    f = write(tmp_path / "s.properties", "log.retention.hours=1\nlog.retention.minutes=5\n")
    assert load_config(f).storage.topic_defaults["retention.ms"] == "300000"
    cfg = load_config(f, ["log.retention.ms=42"])
    assert cfg.storage.topic_defaults["retention.ms"] == "42"
    assert cfg.log_config().retention_ms == 42
    roll = load_config(f, ["log.roll.hours=2"]).storage.topic_defaults["segment.ms"]
    assert roll == "7200000"
    assert load_config(f, ["log.roll.hours=2", "log.roll.ms=5"]).storage.topic_defaults["segment.ms"] == "5"


def test_dropin_and_override_order_with_sources(tmp_path: Path) -> None:
    f = write(tmp_path / "server.properties", "num.partitions=2\nlog.dirs=/a,/b\n")
    d = tmp_path / "server.properties.d"
    d.mkdir()
    write(d / "20-b.properties", "num.partitions=4\n")
    write(d / "10-a.properties", "num.partitions=3\nmessage.max.bytes=100\n")
    write(d / "ignored.txt", "num.partitions=9\n")
    cfg = load_config(f)
    assert cfg.server.num_partitions == 4
    assert cfg.settings["num.partitions"].origin.file == str(d / "20-b.properties")
    assert str(cfg.settings["message.max.bytes"].origin) == f"{d / '10-a.properties'}:2"
    assert cfg.storage.log_dirs == ("/a", "/b")
    cfg2 = load_config(f, ["num.partitions=7"])
    assert cfg2.server.num_partitions == 7
    assert cfg2.settings["num.partitions"].origin.source is ConfigSource.OVERRIDE
    assert cfg2.settings["delete.topic.enable"].origin.source is ConfigSource.DEFAULT


def test_error_names_file_line_key(tmp_path: Path) -> None:
    f = write(tmp_path / "s.properties", "# x\nbroker.id=1\nnum.partitions=lots\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    msg = str(e.value)
    assert f"{f}:3: num.partitions:" in msg and "integer" in msg
    with pytest.raises(ConfigError, match=r"s.properties:1: num.partitions: value must be at least 1"):
        load_config(write(tmp_path / "s.properties", "num.partitions=0\n"))
    with pytest.raises(ConfigError, match=r"ssl.keystore.location: listener SSL uses TLS"):
        load_config(None, ["listeners=SSL://:9093"])
    with pytest.raises(ConfigError, match=r"listeners: listener FOO has no entry"):
        load_config(None, ["listeners=FOO://:9093"])
    with pytest.raises(ConfigError, match="not key=value"):
        load_config(None, ["nonsense"])
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.properties")


def test_cross_key_checks() -> None:
    with pytest.raises(ConfigError, match=r"broker\.id: must be set"):
        load_config(None, ["zookeeper.connect=localhost:2181", "broker.id.generation.enable=false"])
    assert load_config(None, ["zookeeper.connect=localhost:2181"]).server.broker_id == -1
    with pytest.raises(ConfigError, match=r"bridge\.landing\.dir"):
        load_config(None, ["bridge.enabled=true"])


def test_unknown_key_warns_with_suggestion(tmp_path: Path) -> None:
    f = write(tmp_path / "s.properties", "num.partition=3\n")
    cfg = load_config(f)
    assert len(cfg.warnings) == 1
    assert "did you mean num.partitions?" in cfg.warnings[0]
    assert f"{f}:1" in cfg.warnings[0]


def test_listeners_parse() -> None:
    cfg = load_config(
        None, ["listeners=PLAINTEXT://127.0.0.1:19092", "advertised.listeners=PLAINTEXT://edge1:9092"]
    )
    assert (cfg.server.listeners[0].host, cfg.server.listeners[0].port) == ("127.0.0.1", 19092)
    assert cfg.server.advertised_listeners[0].host == "edge1"


def test_log_manager_config_and_describe() -> None:
    cfg = load_config(None, ["log.dirs=/x", "log.dirs.max.bytes=1000", "message.max.bytes=5000"])
    lmc = cfg.log_manager_config()
    assert lmc.log_dirs == ("/x",) and lmc.log_dirs_max_bytes == 1000
    assert cfg.log_config().max_message_bytes == 5000
    rows = {r.name: r for r in describe_broker(cfg)}
    assert len(rows) == len(KEYS)
    assert rows["message.max.bytes"].value == "5000"
    assert rows["message.max.bytes"].source is DescribeSource.STATIC_BROKER_CONFIG
    assert (
        rows["num.partitions"].is_default and rows["num.partitions"].source is DescribeSource.DEFAULT_CONFIG
    )
    assert cfg.topic_default_origin("retention.ms") is not None
    lines = check_config_lines(cfg)
    assert "message.max.bytes=5000  # override" in lines


def test_markdown_lists_every_key() -> None:
    md = render_markdown()
    for k in KEYS:
        assert f"`{k.name}`" in md
