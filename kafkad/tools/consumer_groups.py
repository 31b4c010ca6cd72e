"""kafkad-consumer-groups: Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand) over the wire.

--list (ListGroups), --describe (FindCoordinator, DescribeGroups, OffsetFetch, ListOffsets for the
log-end offsets), --reset-offsets (plan from ListOffsets, printed with --dry-run, committed as a
"simple" OffsetCommit with --execute; the group must be inactive), --delete (DeleteGroups).
Output and messages follow ConsumerGroupCommand.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.tools._cli import bootstrap_of, parse_args, run, security_of, tool_parser
from kafkad.tools.client import BrokerConnection, KafkaApiError, KafkaClient, ToolError, check

TopicPartition = tuple[str, int]
EARLIEST, LATEST = -2, -1


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser("kafkad-consumer-groups", "List, describe, reset or delete consumer groups.")
    for flag, text in (
        ("--list", "List all consumer groups."),
        ("--describe", "Describe consumer group and list offset lag related to given group."),
        ("--reset-offsets", "Reset offsets of consumer group (one group at a time)."),
        ("--delete", "Delete the given consumer groups."),
    ):
        p.add_argument(flag, action="store_true", help=text)
    p.add_argument("--group", action="append", default=[], help="The consumer group.")
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--topic", action="append", default=[], help="topic or topic:0,1,2 (reset).")
    p.add_argument("--all-topics", action="store_true", help="Reset every topic the group has.")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="Reset to the earliest offset.")
    to.add_argument("--to-latest", action="store_true", help="Reset to the latest offset.")
    to.add_argument("--to-offset", type=int, help="Reset to this offset.")
    to.add_argument("--to-datetime", help="Reset to the first offset at or after YYYY-MM-DDTHH:mm:SS.sss.")
    to.add_argument("--shift-by", type=int, help="Shift the current offsets by N (may be negative).")
    p.add_argument("--dry-run", action="store_true", help="Only show the result.")
    p.add_argument("--execute", action="store_true", help="Execute the operation.")
    return p


# --- helpers -------------------------------------------------------------------------------------


def coordinator(client: KafkaClient, group: str) -> BrokerConnection:
    body = client.send(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0})
    check(body["error_code"], f"Coordinator for group '{group}'", body.get("error_message"))
    return client.node(body["node_id"])


def decode_assignment(data: bytes | None) -> list[TopicPartition]:
    """ConsumerProtocol Assignment: version i16, [topic string, [partition i32]], user_data."""
    if not data:
        return []
    out: list[TopicPartition] = []
    try:
        pos = 2
        (n_topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(n_topics, 0)):
            (tlen,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos : pos + tlen].decode()
            pos += tlen
            (n_parts,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for _ in range(max(n_parts, 0)):
                out.append((topic, struct.unpack_from(">i", data, pos)[0]))
                pos += 4
    except (struct.error, UnicodeDecodeError):
        return out
    return out


def committed_offsets(conn: BrokerConnection, group: str) -> dict[TopicPartition, int]:
    body = conn.send(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None})
    check(body.get("error_code", 0), f"Offsets of group '{group}'")
    out: dict[TopicPartition, int] = {}
    for t in body["topics"]:
        for p in t["partitions"]:
            if p["error_code"] == 0 and p["committed_offset"] >= 0:
                out[(t["name"], p["partition_index"])] = p["committed_offset"]
    return out


def list_offsets(
    client: KafkaClient, tps: Sequence[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    """Offsets at `timestamp` (-2 earliest, -1 latest) per partition, asked of each leader."""
    by_leader: dict[int, dict[str, list[int]]] = {}
    for topic, partition in tps:
        leader = client.leader(topic, partition)
        by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
    out: dict[TopicPartition, int] = {}
    for leader, topics in by_leader.items():
        body = client.node(leader).send(
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp} for p in ps]}
                    for t, ps in topics.items()
                ],
            },
        )
        for t in body["topics"]:
            for p in t["partitions"]:
                check(p["error_code"], f"{t['name']}-{p['partition_index']}")
                out[(t["name"], p["partition_index"])] = p["offset"]
    return out


def describe_group(conn: BrokerConnection, group: str) -> dict[str, Any]:
    body = conn.send(ApiKey.DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False})
    g: dict[str, Any] = body["groups"][0]
    check(g["error_code"], f"Group '{group}'")
    return g


def _table(rows: list[list[str]], fixed: dict[int, int]) -> str:
    """Columns padded to the longest value (Kafka's "%-Ns" formats); `fixed` gives minimum widths."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, w in fixed.items():
        widths[i] = max(widths[i], w)
    lines = []
    for r in rows:
        cells = [c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)]
        lines.append(" ".join(cells).rstrip())
    return "\n".join(lines)


# --- actions -------------------------------------------------------------------------------------


def list_groups(client: KafkaClient) -> None:
    body = client.send(ApiKey.LIST_GROUPS, {})
    check(body["error_code"], "ListGroups")
    for g in sorted(body["groups"], key=lambda g: g["group_id"]):
        print(g["group_id"])


def describe(client: KafkaClient, group: str) -> None:
    conn = coordinator(client, group)
    g = describe_group(conn, group)
    state = g["group_state"]
    committed = committed_offsets(conn, group)
    if state == "Dead" and not committed:
        print(f"\nConsumer group '{group}' does not exist.")
        return
    owners: dict[TopicPartition, dict[str, Any]] = {}
    for m in g["members"]:
        for tp in decode_assignment(m["member_assignment"]):
            owners[tp] = m
    tps = sorted(set(committed) | set(owners))
    ends = list_offsets(client, tps, LATEST) if tps else {}
    if state == "Empty" or not g["members"]:
        print(f"\nConsumer group '{group}' has no active members.")
    elif state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.")
    rows = [
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    ]
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp)
        lag = "-" if cur is None or end is None else str(max(end - cur, 0))
        m = owners.get(tp)
        rows.append(
            [
                group,
                tp[0],
                str(tp[1]),
                "-" if cur is None else str(cur),
                "-" if end is None else str(end),
                lag,
                m["member_id"] if m else "-",
                m["client_host"] if m else "-",
                m["client_id"] if m else "-",
            ]
        )
    # members without partitions are listed too, as Kafka does
    for m in g["members"]:
        if not decode_assignment(m["member_assignment"]):
            rows.append([group, "-", "-", "-", "-", "-", m["member_id"], m["client_host"], m["client_id"]])
    print()
    print(_table(rows, {2: 10, 3: 15, 4: 15, 5: 15}))


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime: 'YYYY-MM-DDTHH:mm:SS.sss' with an optional zone (default: local)."""
    s = text.strip().replace("Z", "+00:00")
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            dt = datetime.strptime(s, fmt)
        except ValueError:
            continue
        if dt.tzinfo is None:
            dt = dt.astimezone()  # local time, like Kafka's default
        return int(dt.astimezone(UTC).timestamp() * 1000)
    raise ToolError(f"Error parsing datetime '{text}': expected format yyyy-MM-dd'T'HH:mm:ss.SSS")


def reset_targets(
    client: KafkaClient, args: argparse.Namespace, committed: dict[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    tps: list[TopicPartition] = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        if parts:
            tps.extend((topic, int(p)) for p in parts.split(",") if p.strip())
        else:
            info = client.metadata([topic]).topic(topic)
            tps.extend((topic, p.partition) for p in info.partitions)
    return sorted(set(tps))


def reset_offsets(client: KafkaClient, group: str, args: argparse.Namespace) -> None:
    conn = coordinator(client, group)
    g = describe_group(conn, group)
    if g["group_state"] not in ("Empty", "Dead"):
        raise ToolError(
            f"Assignments can only be reset if the group '{group}' is inactive, "
            f"but the current state is {g['group_state']}."
        )
    committed = committed_offsets(conn, group)
    tps = reset_targets(client, args, committed)
    if not tps:
        raise ToolError("No partitions to reset: give --topic T[:P,...] or --all-topics")
    earliest = list_offsets(client, tps, EARLIEST)
    latest = list_offsets(client, tps, LATEST)

    def clamp(tp: TopicPartition, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    plan: dict[TopicPartition, int] = {}
    if args.to_earliest:
        plan = dict(earliest)
    elif args.to_latest:
        plan = dict(latest)
    elif args.to_offset is not None:
        plan = {tp: clamp(tp, args.to_offset) for tp in tps}
    elif args.shift_by is not None:
        plan = {tp: clamp(tp, committed.get(tp, latest[tp]) + args.shift_by) for tp in tps}
    elif args.to_datetime is not None:
        at = list_offsets(client, tps, parse_datetime(args.to_datetime))
        plan = {tp: at[tp] if at.get(tp, -1) >= 0 else latest[tp] for tp in tps}
    else:
        raise ToolError(
            "Option [reset-offsets] takes one of these options: --to-datetime, --to-earliest, "
            "--to-latest, --shift-by, --to-offset"
        )
    if args.execute:
        body = conn.send(
            ApiKey.OFFSET_COMMIT,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": t,
                        "partitions": [
                            {"partition_index": p, "committed_offset": o, "committed_metadata": ""}
                            for (t2, p), o in sorted(plan.items())
                            if t2 == t
                        ],
                    }
                    for t in sorted({t for t, _ in plan})
                ],
            },
        )
        for t in body["topics"]:
            for p in t["partitions"]:
                check(p["error_code"], f"Commit of {t['name']}-{p['partition_index']}")
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group, t, str(p), str(o)] for (t, p), o in sorted(plan.items())]
    print()
    print(_table(rows, {0: 30, 1: 30, 2: 10, 3: 15}))


def delete_groups(client: KafkaClient, groups: list[str]) -> int:
    failed: dict[str, str] = {}
    for group in groups:
        conn = coordinator(client, group)
        body = conn.send(ApiKey.DELETE_GROUPS, {"groups_names": [group]})
        for r in body["results"]:
            if r["error_code"] != 0:
                failed[r["group_id"]] = KafkaApiError(ErrorCode(r["error_code"])).message
    ok = [g for g in groups if g not in failed]
    if ok:
        names = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        print("Deletion of some consumer groups failed:")
        for g, why in failed.items():
            print(f"* Group '{g}' could not be deleted due to: {why}")
        return 1
    return 0


def check_args(args: argparse.Namespace) -> str:
    actions = [a for a in ("list", "describe", "reset_offsets", "delete") if getattr(args, a)]
    if len(actions) != 1:
        raise ToolError(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets"
        )
    action = actions[0]
    if action != "list" and not args.group and not args.all_groups:
        raise ToolError(
            f"Option [{action.replace('_', '-')}] takes one of these options: [all-groups], [group]"
        )
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            raise ToolError("Option [reset-offsets] takes only one of [dry-run], [execute]")
        if not args.topic and not args.all_topics:
            raise ToolError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
    return action


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)

    def body() -> int:
        action = check_args(args)
        with KafkaClient(bootstrap_of(args), client_id=args.client_id, security=security_of(args)) as client:
            groups = list(args.group)
            if args.all_groups:
                listing = client.send(ApiKey.LIST_GROUPS, {})
                groups = sorted(g["group_id"] for g in listing["groups"])
            status = 0
            if action == "list":
                list_groups(client)
            elif action == "describe":
                for g in groups:
                    describe(client, g)
            elif action == "reset_offsets":
                if not args.execute and not args.dry_run:
                    print(
                        "WARN: No action will be performed as the --execute option is missing. "
                        "You should add the --dry-run option explicitly if you are scripting this command."
                    )
                for g in groups:
                    reset_offsets(client, g, args)
            else:
                status = delete_groups(client, groups)
        sys.stdout.flush()
        return status

    return run(body, "Error")


if __name__ == "__main__":
    sys.exit(main())
