"""kafkad-reassign-partitions: Kafka's kafka-reassign-partitions.sh (ReassignPartitionsCommand) over the wire.

--generate --topics-to-move-json-file F --broker-list 1,2,3   prints the current and a proposed assignment
    (Kafka's replica placement, rack-aware when every broker has a rack);
--execute --reassignment-json-file F   starts the moves (AlterPartitionReassignments to the controller) and
    prints the current assignment to keep for a rollback;
--verify --reassignment-json-file F    says, per partition, whether its move is complete (exit 1 while not);
--list                                  the reassignments in progress;
--cancel --reassignment-json-file F    cancels the named moves (the partitions go back to their replicas).
JSON as Kafka's: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkad.controller.assignment import assign_replicas  # Kafka's placement (a pure function)
from kafkad.protocol import ApiKey, ErrorCode, KafkaError
from kafkad.tools._cli import bootstrap_of, parse_args, run, tool_parser
from kafkad.tools.client import KafkaClient, ToolError, check, error_class_name

TP = tuple[str, int]


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser("kafkad-reassign-partitions", "Move partitions between brokers.", broker_list_alias=False)
    action = p.add_mutually_exclusive_group()
    for flag in ("--generate", "--execute", "--verify", "--list", "--cancel"):
        action.add_argument(flag, action="store_true")
    p.add_argument("--topics-to-move-json-file", type=Path, help='{"topics":[{"topic":"t"}],"version":1}')
    p.conflict_handler = (
        "resolve"  # here --broker-list is Kafka's list of target brokers, not a bootstrap alias
    )
    p.add_argument("--broker-list", help="with --generate: the brokers to place replicas on, e.g. 1,2,3")
    p.add_argument("--reassignment-json-file", type=Path, help="the moves (Kafka's reassignment JSON)")
    p.add_argument("--throttle", type=int, default=-1, help="accepted for compatibility (no throttling)")
    p.add_argument("--timeout", type=int, default=10000, help="accepted for compatibility")
    p.add_argument("--additional", action="store_true", help="accepted for compatibility")
    p.add_argument("--preserve-throttles", action="store_true", help="accepted for compatibility")
    return p


def to_json(assignment: Mapping[TP, Sequence[int]]) -> str:
    parts = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def read_moves(path: Path | None) -> dict[TP, list[int]]:
    if path is None:
        raise ToolError('Missing required argument "[reassignment-json-file]"')
    try:
        doc = json.loads(path.read_text())
        moves = {
            (str(e["topic"]), int(e["partition"])): [int(b) for b in e["replicas"]] for e in doc["partitions"]
        }
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ToolError(f"cannot read {path}: {e}") from None
    if not moves:
        raise ToolError("Partition reassignment list cannot be empty")
    return moves


def current(client: KafkaClient, topics: Sequence[str]) -> dict[TP, tuple[int, ...]]:
    md = client.metadata(list(topics))
    return {(t, p.partition): p.replicas for t in topics for p in md.topic(t).partitions}


def generate(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.topics_to_move_json_file is None or not args.broker_list:
        raise ToolError("--generate needs --topics-to-move-json-file and --broker-list")
    try:
        topics = [str(e["topic"]) for e in json.loads(args.topics_to_move_json_file.read_text())["topics"]]
        brokers = [int(b) for b in args.broker_list.split(",")]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ToolError(f"invalid --topics-to-move-json-file or --broker-list: {e}") from None
    md = client.metadata(topics)
    racks = {b: (md.brokers[b].rack if b in md.brokers else None) for b in brokers}
    if any(r is None for r in racks.values()):
        racks = dict.fromkeys(brokers)
    cur = current(client, topics)
    proposed: dict[TP, list[int]] = {}
    for t in topics:
        parts = sorted(p for tt, p in cur if tt == t)
        try:
            placed = assign_replicas(racks, len(parts), len(cur[(t, parts[0])]))
        except KafkaError as e:
            raise ToolError(e.message or str(e.code)) from None
        proposed.update({(t, p): placed[p] for p in parts})
    print(f"Current partition replica assignment\n{to_json(cur)}\n")
    print(f"Proposed partition reassignment configuration\n{to_json(proposed)}")
    return 0


def controller_send(client: KafkaClient, api_key: int, body: Mapping[str, Any]) -> dict[str, Any]:
    md = client.metadata([])
    if md.controller_id < 0:
        raise ToolError("the cluster has no controller right now; retry")
    resp = client.node(md.controller_id).send(api_key, body)
    check(resp.get("error_code", 0), "", resp.get("error_message"))
    return resp


def alter(client: KafkaClient, moves: Mapping[TP, list[int] | None]) -> dict[TP, tuple[int, str | None]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p), reps in sorted(moves.items()):
        by_topic.setdefault(t, []).append({"partition_index": p, "replicas": reps})
    body = {"timeout_ms": 30000, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    resp = controller_send(client, ApiKey.ALTER_PARTITION_REASSIGNMENTS, body)
    return {
        (r["name"], p["partition_index"]): (p["error_code"], p.get("error_message"))
        for r in resp["responses"]
        for p in r["partitions"]
    }


def report_failures(results: Mapping[TP, tuple[int, str | None]], what: str) -> int:
    failed = {tp: r for tp, r in results.items() if r[0] != ErrorCode.NONE}
    if not failed:
        return 0
    print(f"Error {what} partition reassignment:", file=sys.stderr)
    for (t, p), (code, msg) in sorted(failed.items()):
        print(f"{t}-{p}: {error_class_name(ErrorCode(code))}{': ' + msg if msg else ''}", file=sys.stderr)
    return 1


def execute(client: KafkaClient, args: argparse.Namespace) -> int:
    moves = read_moves(args.reassignment_json_file)
    cur = current(client, sorted({t for t, _ in moves}))
    print(f"Current partition replica assignment\n\n{to_json({tp: cur[tp] for tp in moves if tp in cur})}\n")
    print("Save this to use as the --reassignment-json-file option during rollback")
    status = report_failures(alter(client, dict(moves)), "starting")
    if status == 0:
        print(
            f"Successfully started partition reassignments for {','.join(f'{t}-{p}' for t, p in sorted(moves))}"
        )
    return status


def ongoing(
    client: KafkaClient, tps: Sequence[TP] | None
) -> dict[TP, tuple[list[int], list[int], list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps or []:
        by_topic.setdefault(t, []).append(p)
    body = {
        "timeout_ms": 30000,
        "topics": None
        if tps is None
        else [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
    }
    resp = controller_send(client, ApiKey.LIST_PARTITION_REASSIGNMENTS, body)
    return {
        (t["name"], p["partition_index"]): (p["replicas"], p["adding_replicas"], p["removing_replicas"])
        for t in resp["topics"]
        for p in t["partitions"]
    }


def verify(client: KafkaClient, args: argparse.Namespace) -> int:
    moves = read_moves(args.reassignment_json_file)
    busy = ongoing(client, sorted(moves))
    cur = current(client, sorted({t for t, _ in moves}))
    print("Status of partition reassignment:")
    done = True
    for (t, p), target in sorted(moves.items()):
        if (t, p) in busy:
            print(f"Reassignment of partition {t}-{p} is still in progress.")
            done = False
        elif list(cur.get((t, p), ())) == target:
            print(f"Reassignment of partition {t}-{p} is completed.")
        else:
            print(
                f"There is no active reassignment of partition {t}-{p}, but replica set is {list(cur.get((t, p), ()))} rather than {target}."
            )
            done = False
    return 0 if done else 1


def list_moves(client: KafkaClient, _args: argparse.Namespace) -> int:
    busy = ongoing(client, None)
    if not busy:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (t, p), (reps, adding, removing) in sorted(busy.items()):
        print(
            f"{t}-{p}: replicas: {','.join(map(str, reps))}. adding: {','.join(map(str, adding))}. removing: {','.join(map(str, removing))}."
        )
    return 0


def cancel(client: KafkaClient, args: argparse.Namespace) -> int:
    moves = read_moves(args.reassignment_json_file)
    status = report_failures(alter(client, dict.fromkeys(moves)), "cancelling")
    if status == 0:
        print(
            f"Successfully cancelled partition reassignments for: {','.join(f'{t}-{p}' for t, p in sorted(moves))}"
        )
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)

    def body() -> int:
        actions = {
            "generate": generate,
            "execute": execute,
            "verify": verify,
            "list": list_moves,
            "cancel": cancel,
        }
        chosen = [fn for name, fn in actions.items() if getattr(args, name)]
        if len(chosen) != 1:
            raise ToolError(
                "Command must include exactly one action: --generate, --execute, --verify, --cancel, or --list"
            )
        with KafkaClient(bootstrap_of(args), client_id=args.client_id) as client:
            status = chosen[0](client, args)
        sys.stdout.flush()
        return status

    return run(body, "Error")


if __name__ == "__main__":
    sys.exit(main())
