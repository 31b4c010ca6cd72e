"""kafkad-get-offsets: --time/--partitions parsing, GetOffsetShell's output, the ListOffsets it sends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.tools import get_offsets as go
from kafkad.tools.client import ToolError
from tests.unit.tools.test_client_fake import FakeBroker


def test_parse_time() -> None:
    assert [go.parse_time(t) for t in ("-1", "latest", "-2", "earliest", "-3", "1700000000000")] == [
        -1, -1, -2, -2, -3, 1700000000000,
    ]  # fmt: skip
    for bad in ("yesterday", "-7"):
        with pytest.raises(ToolError):
            go.parse_time(bad)


def test_parse_partitions() -> None:
    assert go.parse_partitions("0,2,4-6") == [0, 2, 4, 5, 6]
    assert go.parse_partitions(None) is None
    with pytest.raises(ToolError):
        go.parse_partitions("a")


def test_format_lines_skips_unknown_offsets_and_reports_errors() -> None:
    results = {
        1: go.OffsetResult(1, 0, 42, -1),
        0: go.OffsetResult(0, 0, 7, -1),
        2: go.OffsetResult(2, 0, -1, -1),
        3: go.OffsetResult(3, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1),
    }
    lines, errors = go.format_lines("t", results)
    assert lines == ["t:0:7", "t:1:42"]
    assert len(errors) == 1 and errors[0].startswith(
        "Skip getting offsets for topic-partition t:3 due to error"
    )


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as b:
        b.handlers[ApiKey.METADATA] = lambda req: b.metadata_body({"t": 3, "u": 1})

        def list_offsets(req: Request) -> dict[str, Any]:
            t = req.body["topics"][0]
            return {"topics": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
                 "offset": 0 if p["timestamp"] == -2 else 10 + p["partition_index"]} for p in t["partitions"]]}]}  # fmt: skip

        b.handlers[ApiKey.LIST_OFFSETS] = list_offsets
        yield b


def test_main_prints_topic_partition_offset(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    assert go.main(["--bootstrap-server", broker.bootstrap, "--topic", "t"]) == 0
    assert capsys.readouterr().out == "t:0:10\nt:1:11\nt:2:12\n"
    assert (
        go.main(
            ["--bootstrap-server", broker.bootstrap, "--topic", "t", "--partitions", "0,2", "--time", "-2"]
        )
        == 0
    )
    assert capsys.readouterr().out == "t:0:0\nt:2:0\n"
    assert go.main(["--bootstrap-server", broker.bootstrap]) == 0
    assert capsys.readouterr().out == "t:0:10\nt:1:11\nt:2:12\nu:0:10\n"
    lo = [r for r in broker.requests if r.header.api_key == ApiKey.LIST_OFFSETS]
    # (decoded bodies also hold the defaults of fields other versions have: max_num_offsets of v0)
    keys = ("partition_index", "current_leader_epoch", "timestamp")
    assert [{k: p[k] for k in keys} for p in lo[1].body["topics"][0]["partitions"]] == [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2},
        {"partition_index": 2, "current_leader_epoch": -1, "timestamp": -2},
    ]


def test_unknown_topic_fails_cleanly_and_max_timestamp_is_asked(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    assert go.main(["--bootstrap-server", broker.bootstrap, "--topic", "nope"]) == 1
    err = capsys.readouterr().err
    assert "UnknownTopicOrPartitionException" in err and "Traceback" not in err
    # ListOffsets v7+ is spoken now (issue 15): -3 goes to the broker at a version that has it
    assert go.main(["--bootstrap-server", broker.bootstrap, "--topic", "t", "--time", "-3"]) == 0
    lo = [r for r in broker.requests if r.header.api_key == ApiKey.LIST_OFFSETS]
    assert lo[-1].header.api_version >= 7
    assert lo[-1].body["topics"][0]["partitions"][0]["timestamp"] == -3
