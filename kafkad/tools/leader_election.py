"""kafkad-leader-election: Kafka's kafka-leader-election.sh (LeaderElectionCommand) over the wire.

`--election-type preferred|unclean` with `--topic T --partition P`, `--all-topic-partitions` or
`--path-to-json-file F` (`{"partitions": [{"topic": "t", "partition": 0}]}`). The ElectLeaders request goes
to the controller (found in Metadata); the output lines are Kafka's:
"Successfully completed leader election (PREFERRED) for partitions t-0, t-1",
"Valid replica already elected for partitions ...", and one error line per failed partition (exit 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.tools._cli import bootstrap_of, parse_args, run, tool_parser
from kafkad.tools.client import KafkaClient, ToolError, check, error_class_name

TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser("kafkad-leader-election", "Elect the preferred (or an unclean) leader of partitions.")
    p.add_argument(
        "--election-type", required=True, type=str.upper, choices=sorted(TYPES), help="PREFERRED or UNCLEAN"
    )
    p.add_argument("--topic", help="the topic (with --partition)")
    p.add_argument("--partition", type=int, help="the partition (with --topic)")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    p.add_argument("--path-to-json-file", type=Path, help='{"partitions": [{"topic": "t", "partition": 0}]}')
    p.add_argument("--admin.config", dest="admin_config", help="client properties file (ignored)")
    return p


def wanted_partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    """None = every partition; else the (topic, partition) list the flags name."""
    chosen = sum(
        x for x in (args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None)
    )
    if chosen != 1:
        raise ToolError(
            "One and only one of the following options is required: --topic, --all-topic-partitions, --path-to-json-file"
        )
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        if args.partition is None:
            raise ToolError("Missing required option(s) [partition]")
        return [(args.topic, args.partition)]
    try:
        doc = json.loads(args.path_to_json_file.read_text())
        return [(str(e["topic"]), int(e["partition"])) for e in doc["partitions"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ToolError(f"cannot read {args.path_to_json_file}: {e}") from None


def elect(
    client: KafkaClient, election_type: int, wanted: list[tuple[str, int]] | None
) -> dict[tuple[str, int], int]:
    md = client.metadata([])
    if md.controller_id < 0:
        raise ToolError("the cluster has no controller right now; retry")
    by_topic: dict[str, list[int]] = {}
    for t, p in wanted or []:
        by_topic.setdefault(t, []).append(p)
    body: dict[str, Any] = {
        "election_type": election_type,
        "topic_partitions": None
        if wanted is None
        else [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        "timeout_ms": 30000,
    }
    resp = client.node(md.controller_id).send(ApiKey.ELECT_LEADERS, body)
    check(resp.get("error_code", 0), "ElectLeaders")
    return {
        (r["topic"], pr["partition_id"]): pr["error_code"]
        for r in resp["replica_election_results"]
        for pr in r["partition_result"]
    }


def names(tps: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in tps)


def report(kind: str, results: dict[tuple[str, int], int]) -> int:
    ok = sorted(tp for tp, c in results.items() if c == ErrorCode.NONE)
    noop = sorted(tp for tp, c in results.items() if c == ErrorCode.ELECTION_NOT_NEEDED)
    failed = sorted(
        (tp, c) for tp, c in results.items() if c not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
    )
    if ok:
        print(f"Successfully completed leader election ({kind}) for partitions {names(ok)}")
    if noop:
        print(f"Valid replica already elected for partitions {names(noop)}")
    if failed:
        print(f"Error completing leader election ({kind}) for partitions:", file=sys.stderr)
        for (t, p), c in failed:
            print(f"{t}-{p}: {error_class_name(ErrorCode(c))}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)

    def body() -> int:
        wanted = wanted_partitions(args)
        with KafkaClient(bootstrap_of(args), client_id=args.client_id) as client:
            status = report(args.election_type, elect(client, TYPES[args.election_type], wanted))
        sys.stdout.flush()
        return status

    return run(body, "Error while making request")


if __name__ == "__main__":
    sys.exit(main())
