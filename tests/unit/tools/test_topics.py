"""kafkad-topics: option checks, TopicCommand's describe layout, and the requests it sends (FakeBroker)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.tools import topics
from kafkad.tools.client import PartitionInfo, ToolError, TopicInfo
from tests.unit.tools.test_client_fake import FakeBroker


def args(*argv: str) -> Any:
    return topics.build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "exactly one action"),
        (("--create",), "topic"),
        (("--list", "--replication-factor", "2"), "replication-factor"),
        (("--describe", "--partitions", "2"), "partitions"),
        (("--alter", "--topic", "t"), "--partitions"),
        (("--create", "--topic", "t", "--partitions", "0"), "greater than 0"),
        (("--delete", "--topic", "t", "--config", "a=b"), "--config"),
    ],
)
def test_check_args_rejects(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        topics.check_args(args(*argv))


def test_describe_layout_matches_topic_command() -> None:
    info = TopicInfo(
        "t", 0, False, None,
        (PartitionInfo(0, 0, 0, (0,), (0,), (), 0), PartitionInfo(1, -1, 0, (0, 1), (1,), (0,), 0)),
    )  # fmt: skip
    lines = topics.format_topic(info, "retention.ms=1000")
    assert lines == [
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=1000",
        "\tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0",
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 0,1\tIsr: 1\tOffline: 0",
    ]
    with_id = TopicInfo("t", 0, False, "AAAAAAAAAAAAAAAAAAAAAQ", info.partitions[:1])
    assert topics.format_topic(with_id, "")[0].startswith(
        "Topic: t\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 1"
    )


def test_configs_column_skips_defaults_and_hides_sensitive() -> None:
    configs: list[dict[str, Any]] = [
        {"name": "retention.ms", "value": "1000", "config_source": 1, "is_sensitive": False},
        {"name": "segment.bytes", "value": "1073741824", "config_source": 4, "is_sensitive": False},
        {"name": "cleanup.policy", "value": "delete", "config_source": 5, "is_sensitive": False},
        {"name": "secret", "value": None, "config_source": 1, "is_sensitive": True},
    ]
    assert topics.format_configs(configs) == "retention.ms=1000,segment.bytes=1073741824,secret=null"


def test_select_topics_is_a_full_regex_match() -> None:
    ts = {n: TopicInfo(n, 0, n.startswith("__"), None, ()) for n in ("a1", "a2", "ba1", "__consumer_offsets")}
    assert [t.name for t in topics.select_topics(ts, "a.", False)] == ["a1", "a2"]
    assert [t.name for t in topics.select_topics(ts, None, True)] == ["a1", "a2", "ba1"]


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as b:
        existing = {"t": 2}

        def create(req: Request) -> dict[str, Any]:
            t = req.body["topics"][0]
            code = ErrorCode.TOPIC_ALREADY_EXISTS if t["name"] in existing else 0
            return {"topics": [{"name": t["name"], "error_code": code, "error_message": None}]}

        b.handlers[ApiKey.CREATE_TOPICS] = create
        b.handlers[ApiKey.METADATA] = lambda req: b.metadata_body(existing)
        b.handlers[ApiKey.DESCRIBE_CONFIGS] = lambda req: {"results": [
            {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": r["resource_name"],
             "configs": [{"name": "retention.ms", "value": "5", "read_only": False, "config_source": 1,
                          "is_sensitive": False, "synonyms": []}]}
            for r in req.body["resources"]
        ]}  # fmt: skip
        b.handlers[ApiKey.CREATE_PARTITIONS] = lambda req: {
            "results": [{"name": "t", "error_code": 0, "error_message": None}]
        }
        b.handlers[ApiKey.DELETE_TOPICS] = lambda req: {"responses": [{"name": "t", "error_code": 0}]}
        yield b


def test_create_sends_configs_and_prints_created(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = topics.main(["--bootstrap-server", broker.bootstrap, "--create", "--topic", "new", "--partitions", "3",
                      "--replication-factor", "1", "--config", "retention.ms=1000", "--config", "cleanup.policy=compact,delete"])  # fmt: skip
    assert rc == 0
    assert capsys.readouterr().out == "Created topic new.\n"
    req = next(r for r in broker.requests if r.header.api_key == ApiKey.CREATE_TOPICS)
    t = req.body["topics"][0]
    assert (t["name"], t["num_partitions"], t["replication_factor"]) == ("new", 3, 1)
    assert t["configs"] == [
        {"name": "retention.ms", "value": "1000"},
        {"name": "cleanup.policy", "value": "compact,delete"},
    ]


def test_create_existing_fails_unless_if_not_exists(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--bootstrap-server", broker.bootstrap, "--create", "--topic", "t", "--partitions", "1"]
    assert topics.main(base) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error while executing topic command : ")
    assert "Topic 't' already exists." in err
    assert "Traceback" not in err
    assert topics.main([*base, "--if-not-exists"]) == 0
    assert capsys.readouterr().out == ""


def test_describe_and_list(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    assert topics.main(["--bootstrap-server", broker.bootstrap, "--describe", "--topic", "t"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Topic: t\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=5"
    assert out[2] == "\tTopic: t\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0"
    assert topics.main(["--bootstrap-server", broker.bootstrap, "--list"]) == 0
    assert capsys.readouterr().out == "t\n"
    assert topics.main(["--bootstrap-server", broker.bootstrap, "--describe", "--topic", "missing"]) == 1
    assert "Topic 'missing' does not exist as expected" in capsys.readouterr().err


def test_alter_and_delete_send_their_requests(broker: FakeBroker) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    assert topics.main([*b, "--alter", "--topic", "t", "--partitions", "4"]) == 0
    assert topics.main([*b, "--delete", "--topic", "t"]) == 0
    assert topics.main([*b, "--delete", "--topic", "zz"]) == 1
    assert topics.main([*b, "--delete", "--topic", "zz", "--if-exists"]) == 0
    cp = next(r for r in broker.requests if r.header.api_key == ApiKey.CREATE_PARTITIONS)
    assert cp.body["topics"][0]["count"] == 4
    dt = [r for r in broker.requests if r.header.api_key == ApiKey.DELETE_TOPICS]
    assert [r.body["topic_names"] for r in dt] == [["t"]]


def test_missing_bootstrap_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert topics.main(["--list"]) == 1
    assert "bootstrap-server" in capsys.readouterr().err
