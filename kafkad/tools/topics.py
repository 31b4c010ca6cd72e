"""kafkad-topics: Kafka's kafka-topics.sh (TopicCommand) over the wire.

--create (CreateTopics), --list and --describe (Metadata, plus DescribeConfigs for the "Configs:" column
when the broker has it), --alter --partitions (CreatePartitions), --delete (DeleteTopics). Output and
messages follow TopicCommand so scripts and habits carry over.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.tools._cli import bootstrap_of, parse_args, parse_properties, run, security_of, tool_parser
from kafkad.tools.client import KafkaApiError, KafkaClient, ToolError, TopicInfo, check

RESOURCE_TOPIC = 2
CONFIG_SOURCE_DEFAULT = 5
TIMEOUT_MS = 30000


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser("kafkad-topics", "Create, delete, describe, or change a topic.")
    action = p.add_mutually_exclusive_group()
    for flag, text in (
        ("--create", "Create a new topic."),
        ("--list", "List all available topics."),
        ("--describe", "List details for the given topics."),
        ("--alter", "Alter the number of partitions of the topic."),
        ("--delete", "Delete a topic."),
    ):
        action.add_argument(flag, action="store_true", help=text)
    p.add_argument(
        "--topic", help="The topic to create, alter, describe or delete (a regex for list/describe)."
    )
    p.add_argument("--partitions", type=int, help="The number of partitions for the topic.")
    p.add_argument("--replication-factor", type=int, help="The replication factor for each partition.")
    p.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B3:B4",
        help="Explicit replicas per partition (partitions separated by commas, replicas by colons).",
    )
    p.add_argument(
        "--config", action="append", default=[], metavar="NAME=VALUE", help="A topic config override."
    )
    p.add_argument("--if-not-exists", action="store_true", help="With --create: only create if absent.")
    p.add_argument(
        "--if-exists", action="store_true", help="With --alter/--delete/--describe: only if present."
    )
    p.add_argument(
        "--exclude-internal", action="store_true", help="Leave internal topics out of list/describe."
    )
    return p


def check_args(args: argparse.Namespace) -> None:
    """TopicCommand's option checks, with its wording."""
    actions = [a for a in ("create", "list", "describe", "alter", "delete") if getattr(args, a)]
    if len(actions) != 1:
        raise ToolError(
            "Command must include exactly one action: --list, --describe, --create, --alter or --delete"
        )
    action = actions[0]
    if action in ("create", "alter", "delete") and not args.topic:
        raise ToolError(f'Missing required argument "[topic]" for --{action}')
    if args.replication_factor is not None and action != "create":
        raise ToolError('Option "[replication-factor]" can\'t be used with option "[' + action + ']"')
    if args.partitions is not None and action not in ("create", "alter"):
        raise ToolError('Option "[partitions]" can\'t be used with option "[' + action + ']"')
    if action == "alter" and args.partitions is None:
        raise ToolError("--alter needs --partitions N (replication factor and configs are changed elsewhere)")
    if args.config and action != "create":
        raise ToolError("--config is only valid with --create; use kafkad-configs --alter to change configs")
    if args.if_not_exists and action != "create":
        raise ToolError('Option "[if-not-exists]" can\'t be used with option "[' + action + ']"')
    if args.replica_assignment is not None:
        if action != "create":
            raise ToolError('Option "[replica-assignment]" can\'t be used with option "[' + action + ']"')
        if args.partitions is not None or args.replication_factor is not None:
            raise ToolError(
                "--replica-assignment cannot be combined with --partitions or --replication-factor"
            )
    if args.partitions is not None and args.partitions < 1:
        raise ToolError("The partitions must be greater than 0")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise ToolError("The replication factor must be greater than 0")


def replica_assignment(text: str | None) -> list[dict[str, Any]]:
    """TopicCommand's --replica-assignment "1:2,2:3" as CreateTopics assignments."""
    if not text:
        return []
    try:
        return [
            {"partition_index": i, "broker_ids": [int(b) for b in part.split(":")]}
            for i, part in enumerate(text.split(","))
        ]
    except ValueError:
        raise ToolError(f"Invalid --replica-assignment '{text}': expected broker ids like 1:2,2:3") from None


def create(client: KafkaClient, args: argparse.Namespace) -> None:
    configs = parse_properties(args.config)
    version = client.conn.version(ApiKey.CREATE_TOPICS)
    partitions = args.partitions if args.partitions is not None else -1
    rf = args.replication_factor if args.replication_factor is not None else -1
    if version < 4 and (partitions < 0 or rf < 0):
        raise ToolError("The broker needs --partitions and --replication-factor (CreateTopics < v4)")
    body = {
        "topics": [
            {
                "name": args.topic,
                "num_partitions": partitions,
                "replication_factor": rf,
                "assignments": replica_assignment(args.replica_assignment),
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout_ms": TIMEOUT_MS,
        "validate_only": False,
    }
    result = client.send(ApiKey.CREATE_TOPICS, body)["topics"][0]
    code = result["error_code"]
    if code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return
    if code == ErrorCode.TOPIC_ALREADY_EXISTS:
        raise KafkaApiError(ErrorCode.TOPIC_ALREADY_EXISTS, "", f"Topic '{args.topic}' already exists.")
    check(code, f"Topic '{args.topic}'", result.get("error_message"))
    print(f"Created topic {args.topic}.")


def select_topics(
    topics: dict[str, TopicInfo], pattern: str | None, exclude_internal: bool
) -> list[TopicInfo]:
    """Topics matching --topic as a regex (whole name, like Kafka's IncludeList), sorted by name."""
    rx = re.compile(pattern) if pattern else None
    out = []
    for name in sorted(topics):
        info = topics[name]
        if exclude_internal and (info.is_internal or name.startswith("__")):
            continue
        if rx is not None and not rx.fullmatch(name):
            continue
        out.append(info)
    return out


def ensure_found(selected: list[TopicInfo], args: argparse.Namespace) -> None:
    if args.topic and not selected and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")


def list_topics(client: KafkaClient, args: argparse.Namespace) -> None:
    for info in select_topics(client.metadata(None).topics, args.topic, args.exclude_internal):
        print(info.name)


def describe_configs(client: KafkaClient, topics: list[str]) -> dict[str, str]:
    """topic -> "k=v,k2=v2" of its non-default configs ("" when the broker cannot tell)."""
    if not topics or not client.supports(ApiKey.DESCRIBE_CONFIGS):
        return {}
    body = {
        "resources": [
            {"resource_type": RESOURCE_TOPIC, "resource_name": t, "configuration_keys": None} for t in topics
        ],
        "include_synonyms": False,
    }
    out: dict[str, str] = {}
    for res in client.send(ApiKey.DESCRIBE_CONFIGS, body)["results"]:
        if res["error_code"] != ErrorCode.NONE:
            continue
        out[res["resource_name"]] = format_configs(res["configs"])
    return out


def format_configs(configs: Sequence[dict[str, Any]]) -> str:
    """TopicCommand's "Configs:" value: the entries whose source is not the default, k=v joined by ','."""
    shown = []
    for c in configs:
        if c.get("config_source", -1) == CONFIG_SOURCE_DEFAULT:
            continue
        if c.get("is_sensitive"):
            shown.append(f"{c['name']}=null")  # Kafka never prints a sensitive value
        else:
            shown.append(f"{c['name']}={'' if c['value'] is None else c['value']}")
    return ",".join(shown)


def format_topic(info: TopicInfo, configs: str) -> list[str]:
    """The lines of TopicCommand's describe output for one topic."""
    rf = len(info.partitions[0].replicas) if info.partitions else 0
    head = f"Topic: {info.name}"
    if info.topic_id is not None:
        head += f"\tTopicId: {info.topic_id}"
    head += f"\tPartitionCount: {len(info.partitions)}\tReplicationFactor: {rf}\tConfigs: {configs}"
    lines = [head]
    for p in info.partitions:
        leader = str(p.leader) if p.leader >= 0 else "none"
        replicas = ",".join(map(str, p.replicas))
        isr = ",".join(map(str, p.isr))
        line = f"\tTopic: {info.name}\tPartition: {p.partition}\tLeader: {leader}\tReplicas: {replicas}\tIsr: {isr}"
        if p.offline:
            line += "\tOffline: " + ",".join(map(str, p.offline))
        lines.append(line)
    return lines


def describe(client: KafkaClient, args: argparse.Namespace) -> None:
    md = client.metadata(None)
    selected = select_topics(md.topics, args.topic, args.exclude_internal)
    ensure_found(selected, args)
    configs = describe_configs(client, [t.name for t in selected])
    for info in selected:
        if info.error_code != ErrorCode.NONE:
            check(info.error_code, f"Topic '{info.name}'")
        for line in format_topic(info, configs.get(info.name, "")):
            print(line)


def _existing(client: KafkaClient, args: argparse.Namespace) -> bool:
    exists = args.topic in client.metadata(None).topics
    if not exists and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    return exists


def alter(client: KafkaClient, args: argparse.Namespace) -> None:
    if not _existing(client, args):
        return
    body = {
        "topics": [{"name": args.topic, "count": args.partitions, "assignments": None}],
        "timeout_ms": TIMEOUT_MS,
        "validate_only": False,
    }
    result = client.send(ApiKey.CREATE_PARTITIONS, body)["results"][0]
    check(result["error_code"], f"Topic '{args.topic}'", result.get("error_message"))


def delete(client: KafkaClient, args: argparse.Namespace) -> None:
    if not _existing(client, args):
        return
    body = {"topic_names": [args.topic], "timeout_ms": TIMEOUT_MS}
    result = client.send(ApiKey.DELETE_TOPICS, body)["responses"][0]
    check(result["error_code"], f"Topic '{args.topic}'")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)

    def body() -> int:
        check_args(args)
        with KafkaClient(bootstrap_of(args), client_id=args.client_id, security=security_of(args)) as client:
            for name, fn in (
                ("create", create),
                ("list", list_topics),
                ("describe", describe),
                ("alter", alter),
                ("delete", delete),
            ):
                if getattr(args, name):
                    fn(client, args)
        sys.stdout.flush()
        return 0

    return run(body, "Error while executing topic command ")


if __name__ == "__main__":
    sys.exit(main())
