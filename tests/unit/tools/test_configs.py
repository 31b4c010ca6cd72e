"""kafkad-configs: entity resolution, ConfigCommand's output layout, and the read-merge-write alter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkad.protocol import ApiKey, Request
from kafkad.protocol.config_resources import ResourceType
from kafkad.tools import configs
from kafkad.tools.client import ToolError
from tests.unit.tools.test_client_fake import FakeBroker


def parse(*argv: str) -> Any:
    return configs.build_parser().parse_args(list(argv))


def test_resolve_entity_shortcuts_and_checks() -> None:
    assert configs.resolve_entity(parse("--describe", "--topic", "t")) == (ResourceType.TOPIC, "t")
    assert configs.resolve_entity(parse("--describe", "--entity-type", "brokers")) == (
        ResourceType.BROKER,
        None,
    )
    assert configs.resolve_entity(parse("--describe", "--entity-type", "brokers", "--entity-default")) == (
        ResourceType.BROKER, "",
    )  # fmt: skip
    for argv, msg in [
        (("--describe",), "entity-type"),
        (("--alter", "--topic", "t"), "add-config or --delete-config"),
        (("--describe", "--topic", "t", "--add-config", "a=1"), "only valid with --alter"),
        (("--describe", "--entity-type", "brokers", "--entity-name", "x"), "valid integer broker id"),
        (("--alter", "--entity-type", "topics", "--add-config", "a=1"), "entity name must be specified"),
    ]:
        with pytest.raises(ToolError, match=msg):
            configs.resolve_entity(parse(*argv))


def test_entry_line_like_config_command() -> None:
    entry = {"name": "retention.ms", "value": "1000", "is_sensitive": False,
             "synonyms": [{"name": "retention.ms", "value": "1000", "source": 1},
                          {"name": "log.retention.hours", "value": "168", "source": 5}]}  # fmt: skip
    assert configs.format_entry(entry) == (
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.hours=168}"
    )
    assert (
        configs.Entity(ResourceType.TOPIC, "t").describe_heading(False) == "Dynamic configs for topic t are:"
    )
    assert configs.Entity(ResourceType.BROKER, "0").describe_heading(True) == "All configs for broker 0 are:"


def test_merge_overrides() -> None:
    assert configs.merge_overrides({"a": "1", "b": "2"}, {"c": "3", "a": "9"}, ["b"]) == {"a": "9", "c": "3"}
    with pytest.raises(ToolError, match="Invalid config"):
        configs.merge_overrides({"a": "1"}, {}, ["zz"])
    with pytest.raises(ToolError, match="sensitive"):
        configs.merge_overrides({"pw": None}, {"a": "1"}, [])
    assert configs.merge_overrides({"pw": None}, {"pw": "new"}, []) == {"pw": "new"}


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    state = {"retention.ms": "1000", "segment.ms": "5000"}
    with FakeBroker() as b:

        def describe(req: Request) -> dict[str, Any]:
            rows = [{"name": k, "value": v, "read_only": False, "config_source": 1, "is_sensitive": False,
                     "synonyms": [{"name": k, "value": v, "source": 1}]} for k, v in state.items()]  # fmt: skip
            rows.append({"name": "cleanup.policy", "value": "delete", "read_only": False, "config_source": 5,
                         "is_sensitive": False, "synonyms": []})  # fmt: skip
            return {"results": [{"error_code": 0, "error_message": None, "resource_type": 2,
                                 "resource_name": "t", "configs": rows}]}  # fmt: skip

        def alter(req: Request) -> dict[str, Any]:
            state.clear()
            state.update({c["name"]: c["value"] for c in req.body["resources"][0]["configs"]})
            return {
                "responses": [
                    {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t"}
                ]
            }

        b.handlers[ApiKey.DESCRIBE_CONFIGS] = describe
        b.handlers[ApiKey.ALTER_CONFIGS] = alter
        yield b


def test_describe_prints_dynamic_configs_only(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    assert configs.main(["--bootstrap-server", broker.bootstrap, "--describe", "--topic", "t"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Dynamic configs for topic t are:",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}",
        "  segment.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.ms=5000}",
    ]
    assert configs.main(["--bootstrap-server", broker.bootstrap, "--describe", "--topic", "t", "--all"]) == 0
    assert "  cleanup.policy=delete sensitive=false synonyms={}" in capsys.readouterr().out


def test_alter_keeps_other_overrides(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    rc = configs.main(["--bootstrap-server", broker.bootstrap, "--alter", "--entity-type", "topics",
                       "--entity-name", "t", "--add-config", "max.message.bytes=10,cleanup.policy=[compact,delete]",
                       "--delete-config", "segment.ms"])  # fmt: skip
    assert rc == 0
    assert capsys.readouterr().out == "Completed updating config for topic t.\n"
    alter = next(r for r in broker.requests if r.header.api_key == ApiKey.ALTER_CONFIGS)
    sent = {c["name"]: c["value"] for c in alter.body["resources"][0]["configs"]}
    assert sent == {"retention.ms": "1000", "max.message.bytes": "10", "cleanup.policy": "compact,delete"}
    assert configs.main(["--bootstrap-server", broker.bootstrap, "--alter", "--topic", "t",
                         "--delete-config", "nope"]) == 1  # fmt: skip
    assert "Invalid config(s): nope" in capsys.readouterr().err
