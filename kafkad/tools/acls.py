"""kafkad-acls: Kafka's kafka-acls.sh (AclCommand) over the wire (CreateAcls, DescribeAcls, DeleteAcls).

kafkad-acls --bootstrap-server HOST:PORT --add --allow-principal User:alice --operation Read --topic t
kafkad-acls ... --add --allow-principal User:bob --consumer --topic t --group g
kafkad-acls ... --add --allow-principal User:carol --producer --topic logs- --resource-pattern-type prefixed
kafkad-acls ... --list [--topic t] [--principal User:alice]
kafkad-acls ... --remove --force --allow-principal User:alice --operation Read --topic t
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from kafkad.protocol import ApiKey
from kafkad.security.acl import CLUSTER_NAME, Operation, PatternType, Permission, ResourceType
from kafkad.tools._cli import bootstrap_of, parse_args, run, security_of, tool_parser
from kafkad.tools.client import KafkaClient, ToolError, check

_OPS = {o.name.replace("_", "").lower(): o for o in Operation if o not in (Operation.UNKNOWN, Operation.ANY)}


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser("kafkad-acls", "Add, remove or list ACLs (Kafka's kafka-acls).")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--add", action="store_true", help="Add ACLs.")
    action.add_argument("--remove", action="store_true", help="Remove ACLs.")
    action.add_argument("--list", action="store_true", help="List ACLs.")
    p.add_argument("--topic", action="append", default=[], help="Topic resource (repeatable; * for all).")
    p.add_argument("--group", action="append", default=[], help="Consumer group resource (repeatable).")
    p.add_argument("--cluster", action="store_true", help="The cluster resource.")
    p.add_argument("--transactional-id", action="append", default=[], help="Transactional id resource.")
    p.add_argument(
        "--resource-pattern-type",
        default=None,
        type=str.upper,
        choices=["LITERAL", "PREFIXED", "ANY", "MATCH"],
        help="LITERAL (default for --add/--remove), PREFIXED; ANY or MATCH for --list/--remove.",
    )
    p.add_argument(
        "--allow-principal", action="append", default=[], help="Principal to allow, e.g. User:alice."
    )
    p.add_argument("--deny-principal", action="append", default=[], help="Principal to deny.")
    p.add_argument("--allow-host", action="append", default=[], help="Host to allow (default *).")
    p.add_argument("--deny-host", action="append", default=[], help="Host to deny (default *).")
    p.add_argument(
        "--operation", action="append", default=[], help="Operation: Read, Write, Describe, All, ..."
    )
    p.add_argument("--producer", action="store_true", help="WRITE, DESCRIBE, CREATE on the topics.")
    p.add_argument(
        "--consumer", action="store_true", help="READ, DESCRIBE on the topics, READ on the groups."
    )
    p.add_argument(
        "--idempotent", action="store_true", help="With --producer: IDEMPOTENT_WRITE on the cluster."
    )
    p.add_argument(
        "--principal", action="append", default=[], help="With --list: only this principal's ACLs."
    )
    p.add_argument("--force", action="store_true", help="Do not ask for confirmation.")
    return p


def _operation(name: str) -> Operation:
    op = _OPS.get(name.replace("_", "").replace("-", "").lower())
    if op is None:
        raise ToolError(f"Invalid operation {name} (one of {', '.join(o.name for o in _OPS.values())})")
    return op


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _entries(args: argparse.Namespace, rtype: ResourceType) -> list[tuple[str, str, Operation, Permission]]:
    """(principal, host, operation, permission) for one resource type, from the principal/operation flags."""
    if args.producer or args.consumer:
        ops: list[Operation] = []
        if rtype is ResourceType.TOPIC:
            ops = [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE] if args.producer else []
            if args.consumer:
                ops += [o for o in (Operation.READ, Operation.DESCRIBE) if o not in ops]
        elif rtype is ResourceType.GROUP and args.consumer:
            ops = [Operation.READ]
        elif rtype is ResourceType.CLUSTER and args.producer and args.idempotent:
            ops = [Operation.IDEMPOTENT_WRITE]
        elif rtype is ResourceType.TRANSACTIONAL_ID and args.producer:
            ops = [Operation.WRITE, Operation.DESCRIBE]
    else:
        ops = [_operation(o) for o in args.operation] or [Operation.ALL]
    out = []
    for perm, principals, hosts in (
        (Permission.ALLOW, args.allow_principal, args.allow_host or ["*"]),
        (Permission.DENY, args.deny_principal, args.deny_host or ["*"]),
    ):
        for principal in principals:
            if ":" not in principal:
                raise ToolError(f"Invalid principal {principal!r}: expected Type:name, e.g. User:alice")
            out += [(principal, h, op, perm) for h in hosts for op in ops]
    return out


def _pattern_text(rtype: int, name: str, ptype: int) -> str:
    return f"ResourcePattern(resourceType={ResourceType(rtype).name}, name={name}, patternType={PatternType(ptype).name})"


def _entry_text(principal: str, host: str, op: int, perm: int) -> str:
    return f"\t(principal={principal}, host={host}, operation={Operation(op).name}, permissionType={Permission(perm).name})"


def list_acls(client: KafkaClient, args: argparse.Namespace) -> list[str]:
    ptype = PatternType[args.resource_pattern_type or "ANY"]
    filters: list[tuple[ResourceType, str | None]] = [*_resources(args)] or [(ResourceType.ANY, None)]
    lines: list[str] = []
    for principal in args.principal or [None]:
        for rtype, name in filters:
            resp = client.send(
                ApiKey.DESCRIBE_ACLS,
                {
                    "resource_type_filter": int(rtype),
                    "resource_name_filter": name,
                    "pattern_type_filter": int(ptype),
                    "principal_filter": principal,
                    "host_filter": None,
                    "operation": int(Operation.ANY),
                    "permission_type": int(Permission.ANY),
                },
            )
            check(resp["error_code"], "DescribeAcls", resp.get("error_message"))
            for r in resp["resources"]:
                pattern = _pattern_text(r["resource_type"], r["resource_name"], r.get("pattern_type", 3))
                lines.append(f"Current ACLs for resource `{pattern}`: ")
                for a in r["acls"]:
                    lines.append(_entry_text(a["principal"], a["host"], a["operation"], a["permission_type"]))
                lines.append("")
    return lines


def add_acls(client: KafkaClient, args: argparse.Namespace) -> list[str]:
    ptype = PatternType[args.resource_pattern_type or "LITERAL"]
    if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ToolError("--add takes --resource-pattern-type LITERAL or PREFIXED")
    creations: list[dict[str, Any]] = []
    lines: list[str] = []
    for rtype, name in _resources(args):
        entries = _entries(args, rtype)
        if not entries:
            continue
        lines.append(f"Adding ACLs for resource `{_pattern_text(rtype, name, ptype)}`: ")
        for principal, host, op, perm in entries:
            lines.append(_entry_text(principal, host, op, perm))
            creations.append(
                {"resource_type": int(rtype), "resource_name": name, "resource_pattern_type": int(ptype),
                 "principal": principal, "host": host, "operation": int(op), "permission_type": int(perm)}
            )  # fmt: skip
        lines.append("")
    if not creations:
        raise ToolError(
            "Nothing to add: give a resource (--topic/--group/--cluster) and --allow/--deny-principal"
        )
    resp = client.send(ApiKey.CREATE_ACLS, {"creations": creations})
    for r in resp["results"]:
        check(r["error_code"], "CreateAcls", r.get("error_message"))
    return lines


def remove_acls(client: KafkaClient, args: argparse.Namespace) -> list[str]:
    ptype = PatternType[args.resource_pattern_type or "LITERAL"]
    filters: list[dict[str, Any]] = []
    for rtype, name in _resources(args):
        entries = (
            _entries(args, rtype)
            if (args.allow_principal or args.deny_principal)
            else [(None, None, Operation.ANY, Permission.ANY)]
        )
        for principal, host, op, perm in entries:
            filters.append(
                {"resource_type_filter": int(rtype), "resource_name_filter": name, "pattern_type_filter": int(ptype),
                 "principal_filter": principal, "host_filter": host, "operation": int(op), "permission_type": int(perm)}
            )  # fmt: skip
    if not filters:
        raise ToolError("--remove needs a resource (--topic/--group/--cluster)")
    if not args.force:
        answer = input("Are you sure you want to remove ACLs? (y/n) ") if sys.stdin.isatty() else ""
        if answer.strip().lower() != "y":
            raise ToolError("Not removing ACLs (use --force to skip this question)")
    resp = client.send(ApiKey.DELETE_ACLS, {"filters": filters})
    lines: list[str] = []
    for r in resp["filter_results"]:
        check(r["error_code"], "DeleteAcls", r.get("error_message"))
        for a in r["matching_acls"]:
            lines.append(
                f"Removed {_entry_text(a['principal'], a['host'], a['operation'], a['permission_type']).strip()} from "
                f"`{_pattern_text(a['resource_type'], a['resource_name'], a.get('pattern_type', 3))}`"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)

    def body() -> int:
        if not (args.add or args.remove or args.list):
            raise ToolError("Command must include exactly one action: --list, --add, --remove")
        if (args.producer or args.consumer) and not args.add:
            raise ToolError("--producer and --consumer are only valid with --add")
        if args.consumer and args.topic and not args.group:
            raise ToolError("--consumer needs --group")
        with KafkaClient(bootstrap_of(args), client_id=args.client_id, security=security_of(args)) as client:
            action = list_acls if args.list else add_acls if args.add else remove_acls
            for line in action(client, args):
                print(line)
        return 0

    return run(body, "Error while executing ACL command")


if __name__ == "__main__":
    sys.exit(main())
