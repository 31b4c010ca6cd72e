"""kafkad-configs: Kafka's kafka-configs.sh (ConfigCommand) for topics, brokers and users over the wire.

Users: SCRAM credentials, as Kafka's tool manages them: `--alter --add-config
'SCRAM-SHA-256=[iterations=8192,password=alice-secret]' --entity-type users --entity-name alice` salts
the password here (PBKDF2) and sends salt + salted password with AlterUserScramCredentials;
`--delete-config SCRAM-SHA-256` removes one; `--describe` lists mechanisms and iterations
(DescribeUserScramCredentials). The password never reaches the broker.

--describe prints DescribeConfigs (with synonyms) in ConfigCommand's layout, only the dynamic entries unless
--all. --alter uses the non-incremental AlterConfigs, which replaces a resource's whole set of dynamic
overrides, so it reads the current overrides first, applies --add-config / --delete-config, and writes the
merged set back (a key that is not overridden cannot be deleted, as in Kafka).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafkad.protocol import ApiKey
from kafkad.protocol.config_resources import DescribeConfigSource as ConfigSource
from kafkad.protocol.config_resources import ResourceType
from kafkad.tools._cli import (
    bootstrap_of,
    parse_args,
    parse_key_values,
    run,
    security_of,
    split_commas,
    tool_parser,
)
from kafkad.tools.client import KafkaClient, ToolError, check


@dataclass(frozen=True, slots=True)
class Entity:
    type: ResourceType
    name: str  # "" for the cluster-wide broker default

    @property
    def dynamic_source(self) -> ConfigSource:
        if self.type is ResourceType.TOPIC:
            return ConfigSource.DYNAMIC_TOPIC_CONFIG
        return (
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            if self.name == ""
            else ConfigSource.DYNAMIC_BROKER_CONFIG
        )

    def describe_heading(self, all_configs: bool) -> str:
        if self.type is ResourceType.BROKER and self.name == "":
            return "Default configs for brokers in the cluster are:"
        kind = "topic" if self.type is ResourceType.TOPIC else "broker"
        return f"{'All' if all_configs else 'Dynamic'} configs for {kind} {self.name} are:"

    def altered_message(self) -> str:
        if self.type is ResourceType.BROKER and self.name == "":
            return "Completed updating default config for brokers in the cluster."
        kind = "topic" if self.type is ResourceType.TOPIC else "broker"
        return f"Completed updating config for {kind} {self.name}."


def source_name(code: int) -> str:
    try:
        return ConfigSource(code).name
    except ValueError:
        return ConfigSource.UNKNOWN.name


def format_entry(entry: dict[str, Any]) -> str:
    """ConfigCommand's line: '  k=v sensitive=false synonyms={SOURCE:k=v, ...}'."""
    synonyms = ", ".join(
        f"{source_name(s['source'])}:{s['name']}={_v(s['value'])}" for s in entry.get("synonyms") or ()
    )
    return f"  {entry['name']}={_v(entry['value'])} sensitive={str(bool(entry['is_sensitive'])).lower()} synonyms={{{synonyms}}}"


def _v(value: str | None) -> str:
    return "null" if value is None else value


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser("kafkad-configs", "Describe or change the dynamic configs of topics and brokers.")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    action.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument(
        "--entity-type", choices=["topics", "brokers", "users"], help="Type of entity (topics/brokers/users)."
    )
    p.add_argument("--entity-name", help="Name of entity (topic name / broker id / user name).")
    p.add_argument("--entity-default", action="store_true", help="The cluster-wide default (brokers only).")
    p.add_argument("--topic", help="Shortcut for --entity-type topics --entity-name TOPIC.")
    p.add_argument("--broker", help="Shortcut for --entity-type brokers --entity-name ID.")
    p.add_argument("--add-config", action="append", default=[], metavar="K=V,K2=V2", help="Configs to set.")
    p.add_argument("--delete-config", action="append", default=[], metavar="K,K2", help="Configs to remove.")
    p.add_argument("--all", action="store_true", help="With --describe: all configs, not only dynamic ones.")
    return p


def resolve_entity(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    """(type, name or None for "every entity of the type"); "" names the broker default."""
    if not args.describe and not args.alter:
        raise ToolError("Command must include exactly one action: --describe, --alter")
    etype, name = args.entity_type, args.entity_name
    if args.topic is not None:
        if etype not in (None, "topics"):
            raise ToolError("--topic cannot be combined with --entity-type " + etype)
        etype, name = "topics", args.topic
    if args.broker is not None:
        if etype not in (None, "brokers"):
            raise ToolError("--broker cannot be combined with --entity-type " + etype)
        etype, name = "brokers", args.broker
    if etype is None:
        raise ToolError('Missing required argument "[entity-type]" (or --topic / --broker)')
    rtype = ResourceType.TOPIC if etype == "topics" else ResourceType.BROKER
    if args.entity_default:
        if rtype is not ResourceType.BROKER:
            raise ToolError("--entity-default is only valid with --entity-type brokers")
        name = ""
    if rtype is ResourceType.BROKER and name:
        try:
            int(name)
        except ValueError:
            raise ToolError(
                f"The entity name for brokers must be a valid integer broker id, found: {name}"
            ) from None
    if args.alter:
        if name is None:
            raise ToolError("An entity name must be specified with --alter of " + etype)
        if not args.add_config and not args.delete_config:
            raise ToolError("At least one of --add-config or --delete-config must be specified with --alter")
    elif args.add_config or args.delete_config:
        raise ToolError("--add-config and --delete-config are only valid with --alter")
    return rtype, name


def describe_entity(client: KafkaClient, entity: Entity) -> list[dict[str, Any]]:
    body = {
        "resources": [
            {"resource_type": int(entity.type), "resource_name": entity.name, "configuration_keys": None}
        ],
        "include_synonyms": True,
    }
    result = client.send(ApiKey.DESCRIBE_CONFIGS, body)["results"][0]
    what = f"{'Topic' if entity.type is ResourceType.TOPIC else 'Broker'} '{entity.name}'"
    check(result["error_code"], what, result.get("error_message"))
    configs: list[dict[str, Any]] = result["configs"]
    return configs


def describe(client: KafkaClient, rtype: ResourceType, name: str | None, all_configs: bool) -> list[str]:
    if name is None:
        md = client.metadata(None)
        names = sorted(md.topics) if rtype is ResourceType.TOPIC else [str(b) for b in sorted(md.brokers)]
    else:
        names = [name]
    lines: list[str] = []
    for n in names:
        entity = Entity(rtype, n)
        lines.append(entity.describe_heading(all_configs))
        for entry in describe_entity(client, entity):
            if all_configs or entry.get("config_source") == entity.dynamic_source:
                lines.append(format_entry(entry))
    return lines


def merge_overrides(
    current: dict[str, str | None], add: dict[str, str], delete: Sequence[str]
) -> dict[str, str]:
    """The new full set of overrides; ToolError for deleting a key that is not set."""
    missing = [k for k in delete if k not in current and k not in add]
    if missing:
        raise ToolError(f"Invalid config(s): {','.join(missing)}")
    merged = {k: v for k, v in current.items() if k not in delete}
    merged.update(add)
    unreadable = sorted(k for k, v in merged.items() if v is None)
    if unreadable:
        # AlterConfigs replaces the whole set, and sensitive values cannot be read back: say so, do not drop them.
        raise ToolError(
            f"Cannot rewrite the sensitive override(s) {', '.join(unreadable)} (their values are hidden); "
            "give them again with --add-config"
        )
    return {k: v for k, v in merged.items() if v is not None}


def alter(client: KafkaClient, entity: Entity, add: dict[str, str], delete: list[str]) -> str:
    current = {
        e["name"]: e["value"]
        for e in describe_entity(client, entity)
        if e.get("config_source") == entity.dynamic_source
    }
    merged = merge_overrides(current, add, delete)
    body = {
        "resources": [
            {
                "resource_type": int(entity.type),
                "resource_name": entity.name,
                "configs": [{"name": k, "value": v} for k, v in sorted(merged.items())],
            }
        ],
        "validate_only": False,
    }
    result = client.send(ApiKey.ALTER_CONFIGS, body)["responses"][0]
    check(result["error_code"], "", result.get("error_message"))
    return entity.altered_message()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)

    def body() -> int:
        if args.entity_type == "users":
            from kafkad.tools.scram_users import run_users

            return run_users(args)
        rtype, name = resolve_entity(args)
        add = parse_key_values(args.add_config, "config")
        delete = [k for item in args.delete_config for k in split_commas(item)]
        with KafkaClient(bootstrap_of(args), client_id=args.client_id, security=security_of(args)) as client:
            if args.describe:
                for line in describe(client, rtype, name, args.all):
                    print(line)
            else:
                assert name is not None
                print(alter(client, Entity(rtype, name), add, delete))
        return 0

    return run(body, "Error while executing config command with args")


if __name__ == "__main__":
    sys.exit(main())
