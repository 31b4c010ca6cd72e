"""kafkad-leader-election's option checks and Kafka-shaped output (the wire path runs in tests/cluster)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kafkad.protocol import ErrorCode
from kafkad.tools.client import ToolError
from kafkad.tools.leader_election import build_parser, report, wanted_partitions


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["--bootstrap-server", "h:1", *argv])


def test_partition_selection(tmp_path: Path) -> None:
    assert wanted_partitions(args("--election-type", "preferred", "--all-topic-partitions")) is None
    assert wanted_partitions(args("--election-type", "unclean", "--topic", "t", "--partition", "2")) == [
        ("t", 2)
    ]
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"partitions": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 1}]}))
    assert wanted_partitions(args("--election-type", "preferred", "--path-to-json-file", str(f))) == [
        ("a", 0),
        ("b", 1),
    ]
    with pytest.raises(ToolError, match="One and only one"):
        wanted_partitions(args("--election-type", "preferred"))
    with pytest.raises(ToolError, match="partition"):
        wanted_partitions(args("--election-type", "preferred", "--topic", "t"))
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--election-type", "bogus", "--all-topic-partitions"])


def test_report(capsys: pytest.CaptureFixture[str]) -> None:
    status = report(
        "PREFERRED",
        {
            ("t", 1): ErrorCode.NONE,
            ("t", 0): ErrorCode.NONE,
            ("u", 0): ErrorCode.ELECTION_NOT_NEEDED,
            ("v", 3): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        },
    )
    out, err = capsys.readouterr()
    assert status == 1
    assert "Successfully completed leader election (PREFERRED) for partitions t-0, t-1\n" in out
    assert "Valid replica already elected for partitions u-0\n" in out
    assert "v-3: PreferredLeaderNotAvailableException" in err
