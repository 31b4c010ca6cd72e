"""Kafka's ACL model and the authorizer (AclAuthorizer's rules), as an index, not a scan.

An ACL binding is a resource pattern (type, name, LITERAL or PREFIXED) plus an entry (principal, host,
operation, ALLOW/DENY). `authorize(principal, host, operation, type, name)` follows AclAuthorizer:
super users may do anything; a resource with no ACL at all is allowed only with
allow.everyone.if.no.acl.found; any matching DENY wins; else a matching ALLOW (ALL covers every
operation, and READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS).

The ACLs on a resource are found by dict lookups: the literal name, the literal wildcard "*", and one
lookup per distinct prefix length among the PREFIXED patterns of that type. Decisions are cached per
(principal, host, operation, type, name) until the ACLs change, so 10,000 ACLs cost a request one dict hit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

# Kafka's AclEntry.supportedOperations for the resources whose authorized-operations bitfield Metadata,
# DescribeCluster and DescribeGroups report, in Kafka's order.
TOPIC_OPERATIONS = (
    Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE, Operation.ALTER,
    Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
)  # fmt: skip
GROUP_OPERATIONS = (Operation.READ, Operation.DESCRIBE, Operation.DELETE)
CLUSTER_OPERATIONS = (
    Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
    Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE,
)  # fmt: skip

_IMPLIES: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType  # LITERAL or PREFIXED
    principal: str
    host: str
    operation: Operation
    permission: Permission


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls/DeleteAcls filter: ANY / None match everything; MATCH matches what applies to a name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt is PatternType.MATCH:
            if self.name is not None and not (
                b.name == WILDCARD
                or (b.pattern_type is PatternType.LITERAL and b.name == self.name)
                or (b.pattern_type is PatternType.PREFIXED and self.name.startswith(b.name))
            ):
                return False
        else:
            if pt is not PatternType.ANY and pt != b.pattern_type:
                return False
            if self.name is not None and self.name != b.name:
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation is not Operation.ANY and self.operation != b.operation:
            return False
        return self.permission is Permission.ANY or self.permission == b.permission


_Entry = tuple[str, str, Operation, Permission]  # principal, host, operation, permission


class Authorizer:
    """The decision side; `replace`/`add`/`remove` keep the index in step with the store."""

    def __init__(
        self,
        bindings: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._bindings: set[AclBinding] = set()
        self._literal: dict[tuple[int, str], list[_Entry]] = {}
        self._prefixed: dict[tuple[int, str], list[_Entry]] = {}
        self._prefix_lengths: dict[int, list[int]] = {}
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        self.replace(bindings)

    # --- changes ---------------------------------------------------------------------------------
    def replace(self, bindings: Iterable[AclBinding]) -> None:
        self._bindings = set(bindings)
        self._reindex()

    def add(self, bindings: Iterable[AclBinding]) -> None:
        self._bindings.update(bindings)
        self._reindex()

    def remove(self, bindings: Iterable[AclBinding]) -> None:
        self._bindings.difference_update(bindings)
        self._reindex()

    def _reindex(self) -> None:
        literal: dict[tuple[int, str], list[_Entry]] = {}
        prefixed: dict[tuple[int, str], list[_Entry]] = {}
        lengths: dict[int, set[int]] = {}
        for b in self._bindings:
            entry = (b.principal, b.host, b.operation, b.permission)
            if b.pattern_type is PatternType.PREFIXED:
                prefixed.setdefault((b.resource_type, b.name), []).append(entry)
                lengths.setdefault(b.resource_type, set()).add(len(b.name))
            else:
                literal.setdefault((b.resource_type, b.name), []).append(entry)
        self._literal, self._prefixed = literal, prefixed
        self._prefix_lengths = {t: sorted(ls) for t, ls in lengths.items()}
        self._cache = {}

    def bindings(self, flt: AclFilter | None = None) -> list[AclBinding]:
        return [b for b in self._bindings if flt is None or flt.matches(b)]

    def __len__(self) -> int:
        return len(self._bindings)

    # --- decisions -------------------------------------------------------------------------------
    def _acls_on(self, rtype: int, name: str) -> list[_Entry]:
        found: list[_Entry] = []
        lit = self._literal
        e = lit.get((rtype, name))
        if e:
            found += e
        e = lit.get((rtype, WILDCARD))
        if e:
            found += e
        lengths = self._prefix_lengths.get(rtype)
        if lengths:
            pre = self._prefixed
            for n in lengths:
                if n > len(name):
                    break
                e = pre.get((rtype, name[:n]))
                if e:
                    found += e
        return found

    def authorize(
        self, principal: str, host: str, operation: Operation, rtype: ResourceType, name: str
    ) -> bool:
        key = (principal, host, operation, rtype, name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        decision = self._decide(principal, host, operation, rtype, name)
        if len(self._cache) > 100_000:
            self._cache = {}
        self._cache[key] = decision
        return decision

    def _decide(
        self, principal: str, host: str, operation: Operation, rtype: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = self._acls_on(rtype, name)
        if not acls:
            return self.allow_if_no_acl
        allow_ops = _IMPLIES.get(operation, frozenset((operation,)))
        allowed = False
        for p, h, op, perm in acls:
            if (p != principal and p != WILDCARD_PRINCIPAL) or (h != host and h != WILDCARD):
                continue
            if perm is Permission.DENY:
                if op == operation or op is Operation.ALL:
                    return False
            elif op is Operation.ALL or op in allow_ops:
                allowed = True
        return allowed

    def any_allowed(self, principal: str, host: str, operation: Operation, rtype: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: some ALLOW of `operation` (or ALL) on a resource of `rtype`
        for this principal that no DENY covers (used for idempotent producers without IDEMPOTENT_WRITE)."""
        if principal in self.super_users:
            return True
        allow: list[AclBinding] = []
        deny_literal: set[str] = set()
        deny_prefixed: list[str] = []
        for b in self._bindings:
            if (
                b.resource_type == rtype
                and b.operation in (operation, Operation.ALL)
                and b.principal in (principal, WILDCARD_PRINCIPAL)
                and b.host in (host, WILDCARD)
            ):
                if b.permission is Permission.ALLOW:
                    allow.append(b)
                elif b.pattern_type is PatternType.PREFIXED:
                    deny_prefixed.append(b.name)
                else:
                    deny_literal.add(b.name)
        # Kafka's authorizeByResourceType: a DENY on the wildcard denies all; an ALLOW counts unless a
        # DENY covers its whole pattern (the same literal name, or a denied prefix of its name).
        if WILDCARD in deny_literal:
            return False
        for b in allow:
            if any(b.name.startswith(d) for d in deny_prefixed):
                continue
            if b.pattern_type is PatternType.LITERAL and b.name != WILDCARD and b.name in deny_literal:
                continue
            return True
        return False
