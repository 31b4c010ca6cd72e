"""Where ACLs live: a small interface, and the standalone implementation (a local JSON file).

The file mirrors Kafka's ZooKeeper layout: literal patterns as /kafka-acl/<Type>/<name>, prefixed ones as
/kafka-acl-extended/prefixed/<Type>/<name>, each holding `{"version":1,"acls":[{"principal":...,
"permissionType":"Allow","operation":"Read","host":"*"}]}`; here one object keyed "kafka-acl" and
"kafka-acl-extended/prefixed", then by type and name. Written atomically (temp file, fsync, rename).
A ZooKeeper store (cluster mode, with /kafka-acl-changes notifications) implements the same methods.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any, Protocol

from kafkad.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from kafkad.storage.checkpoints import write_atomic

FILE_NAME = "kafkad-acls.json"
_KEYS = {PatternType.LITERAL: "kafka-acl", PatternType.PREFIXED: "kafka-acl-extended/prefixed"}
# Kafka's ZooKeeper names: "Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User".
TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
TYPES = {v: k for k, v in TYPE_NAMES.items()}


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


_OPS = {_camel(o.name): o for o in Operation}
_PERMS = {_camel(p.name): p for p in Permission}


def binding_from_json(rtype: ResourceType, name: str, ptype: PatternType, a: dict[str, Any]) -> AclBinding:
    """One entry of a Kafka ACL znode's "acls" list."""
    return AclBinding(
        rtype, name, ptype, a["principal"], a["host"], _OPS[a["operation"]], _PERMS[a["permissionType"]]
    )


def entry_json(b: AclBinding) -> dict[str, str]:
    return {
        "principal": b.principal,
        "permissionType": _camel(b.permission.name),
        "operation": _camel(b.operation.name),
        "host": b.host,
    }


class AclStore(Protocol):
    def load(self) -> list[AclBinding]: ...
    async def save(self, bindings: list[AclBinding]) -> None:
        """Store the whole set; raises OSError (file) or a ZooKeeper error."""
        ...


class FileAclStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def load(self) -> list[AclBinding]:
        if not self.path.exists():
            return []
        data: dict[str, Any] = json.loads(self.path.read_text())
        out: list[AclBinding] = []
        for ptype, key in _KEYS.items():
            for tname, resources in data.get(key, {}).items():
                for name, node in resources.items():
                    out += [binding_from_json(TYPES[tname], name, ptype, a) for a in node.get("acls", [])]
        return out

    async def save(self, bindings: list[AclBinding]) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._save, bindings)

    def _save(self, bindings: list[AclBinding]) -> None:
        data: dict[str, dict[str, dict[str, Any]]] = {"version": 1}  # type: ignore[dict-item]
        for b in sorted(
            bindings, key=lambda b: (b.pattern_type, b.resource_type, b.name, b.principal, b.operation)
        ):
            node = (
                data.setdefault(_KEYS[b.pattern_type], {})
                .setdefault(TYPE_NAMES[b.resource_type], {})
                .setdefault(b.name, {"version": 1, "acls": []})
            )
            node["acls"].append(entry_json(b))
        with self._lock:
            write_atomic(self.path, (json.dumps(data, indent=1) + "\n").encode(), mode=0o600)
