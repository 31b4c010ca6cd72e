"""kafkad-configs --entity-type users: SCRAM credentials (AlterUserScramCredentials /
DescribeUserScramCredentials), in ConfigCommand's syntax and output."""

from __future__ import annotations

import argparse
import secrets
from typing import Any

from kafkad.protocol import ApiKey
from kafkad.security.scram import MECHANISM_IDS, MECHANISMS, MIN_ITERATIONS, salted_password
from kafkad.tools._cli import bootstrap_of, security_of, split_commas
from kafkad.tools.client import KafkaClient, ToolError, check

_IDS = {v: k for k, v in MECHANISM_IDS.items()}


def split_top(text: str) -> list[str]:
    """Split on commas outside [...] (ConfigCommand's `k=[a=1,b=2],k2=v` syntax)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if depth != 0:
        raise ToolError(f"Unbalanced brackets in {text!r}")
    out.append(cur)
    return [x.strip() for x in out if x.strip()]


def parse_scram_configs(items: list[str]) -> dict[str, tuple[int, str]]:
    """'SCRAM-SHA-256=[iterations=8192,password=x]' -> {mechanism: (iterations, password)}."""
    out: dict[str, tuple[int, str]] = {}
    for item in items:
        for entry in split_top(item):
            mech, sep, value = entry.partition("=")
            mech = mech.strip()
            if mech not in MECHANISMS:
                raise ToolError(f"Invalid config(s): {mech} (users take {', '.join(MECHANISMS)})")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            opts = dict(p.partition("=")[::2] for p in split_top(value)) if sep else {}
            if "password" not in opts:
                raise ToolError(f"{mech} needs password=... (and optionally iterations=...)")
            try:
                iterations = int(opts.get("iterations", MIN_ITERATIONS))
            except ValueError:
                raise ToolError(f"{mech}: iterations must be an integer") from None
            out[mech] = (iterations, opts["password"])
    return out


def alter_users(client: KafkaClient, user: str, add: dict[str, tuple[int, str]], delete: list[str]) -> str:
    upsertions = []
    for mech, (iterations, password) in add.items():
        salt = secrets.token_bytes(32)
        upsertions.append(
            {
                "name": user,
                "mechanism": _IDS[mech],
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted_password(mech, password, salt, iterations),
            }
        )
    for mech in delete:
        if mech not in MECHANISMS:
            raise ToolError(f"Invalid config(s): {mech}")
    deletions = [{"name": user, "mechanism": _IDS[m]} for m in delete]
    resp = client.send(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": deletions, "upsertions": upsertions}
    )
    for r in resp["results"]:
        check(r["error_code"], f"user {r['user']}", r.get("error_message"))
    return f"Completed updating config for user {user}."


def describe_users(client: KafkaClient, user: str | None) -> list[str]:
    body: dict[str, Any] = {"users": None if user is None else [{"name": user}]}
    resp = client.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
    check(resp["error_code"], "DescribeUserScramCredentials", resp.get("error_message"))
    lines = []
    for r in resp["results"]:
        if r["error_code"]:
            if user is not None and len(resp["results"]) == 1:
                lines.append(f"SCRAM credential configs for user-principal '{r['user']}' are ")
                continue
            check(r["error_code"], f"user {r['user']}", r.get("error_message"))
        creds = ", ".join(
            f"{MECHANISM_IDS[c['mechanism']]}=iterations={c['iterations']}" for c in r["credential_infos"]
        )
        lines.append(f"SCRAM credential configs for user-principal '{r['user']}' are {creds}")
    return lines


def run_users(args: argparse.Namespace) -> int:
    if not args.describe and not args.alter:
        raise ToolError("Command must include exactly one action: --describe, --alter")
    user = args.entity_name
    with KafkaClient(bootstrap_of(args), client_id=args.client_id, security=security_of(args)) as client:
        if args.describe:
            for line in describe_users(client, user):
                print(line)
            return 0
        if not user:
            raise ToolError("An entity name must be specified with --alter of users")
        add = parse_scram_configs(args.add_config)
        delete = [k for item in args.delete_config for k in split_commas(item)]
        if not add and not delete:
            raise ToolError("At least one of --add-config or --delete-config must be specified with --alter")
        print(alter_users(client, user, add, delete))
    return 0
