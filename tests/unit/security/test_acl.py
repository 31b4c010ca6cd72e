"""The authorizer follows Kafka's AclAuthorizer rules and stays a lookup with 10,000 ACLs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kafkad.security.acl import (
    AclBinding,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from kafkad.security.acl_store import FileAclStore

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
L, P = PatternType.LITERAL, PatternType.PREFIXED
R, W, D = Operation.READ, Operation.WRITE, Operation.DESCRIBE
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def b(rt: ResourceType, name: str, principal: str, op: Operation, perm: Permission = ALLOW,
      pt: PatternType = L, host: str = "*") -> AclBinding:  # fmt: skip
    return AclBinding(rt, name, pt, principal, host, op, perm)


def test_kafka_rules() -> None:
    a = Authorizer(
        [
            b(T, "orders", "User:alice", R),
            b(T, "logs-", "User:bob", W, pt=P),
            b(T, "*", "User:carol", D),
            b(T, "orders", "User:eve", Operation.ALL),
            b(T, "orders", "User:eve", W, DENY),
            b(G, "g1", "User:*", R),
            b(T, "hosted", "User:alice", R, host="10.0.0.1"),
        ],
        super_users=["User:admin"],
    )
    assert a.authorize("User:alice", "1.2.3.4", R, T, "orders")
    assert a.authorize("User:alice", "1.2.3.4", D, T, "orders")  # READ implies DESCRIBE
    assert not a.authorize("User:alice", "1.2.3.4", W, T, "orders")
    assert not a.authorize("User:alice", "1.2.3.4", R, T, "other")  # no ACL: denied by default
    assert a.authorize("User:bob", "h", W, T, "logs-new-topic")  # prefixed covers new topics
    assert not a.authorize("User:bob", "h", W, T, "log")
    assert a.authorize("User:carol", "h", D, T, "anything") and not a.authorize("User:carol", "h", R, T, "x")
    assert a.authorize("User:eve", "h", R, T, "orders") and not a.authorize("User:eve", "h", W, T, "orders")
    assert a.authorize("User:zed", "h", R, G, "g1") and not a.authorize("User:zed", "h", R, G, "g2")
    assert a.authorize("User:admin", "h", Operation.DELETE, C, "kafka-cluster")
    assert a.authorize("User:alice", "10.0.0.1", R, T, "hosted") and not a.authorize(
        "User:alice", "10.0.0.2", R, T, "hosted"
    )
    open_ = Authorizer([b(T, "orders", "User:alice", R)], allow_if_no_acl=True)
    assert open_.authorize("User:x", "h", W, T, "unprotected") and not open_.authorize(
        "User:x", "h", R, T, "orders"
    )


def test_any_allowed_honours_deny() -> None:
    """Kafka's authorizeByResourceType (InitProducerId without IDEMPOTENT_WRITE): a DENY that covers every
    ALLOW of the type wins."""
    allow = b(T, "orders", "User:alice", W)
    assert Authorizer([allow]).any_allowed("User:alice", "h", W, T)
    for deny in (
        b(T, "*", "User:alice", W, DENY),
        b(T, "orders", "User:*", Operation.ALL, DENY),
        b(T, "ord", "User:alice", W, DENY, P),
    ):
        assert not Authorizer([allow, deny]).any_allowed("User:alice", "h", W, T), deny
    # a DENY on another name or another operation leaves the ALLOW standing
    assert Authorizer([allow, b(T, "other", "User:alice", W, DENY)]).any_allowed("User:alice", "h", W, T)
    assert Authorizer([allow, b(T, "orders", "User:alice", R, DENY)]).any_allowed("User:alice", "h", W, T)


def test_changes_invalidate_cached_decisions() -> None:
    a = Authorizer()
    assert not a.authorize("User:a", "h", R, T, "t")
    a.add([b(T, "t", "User:a", R)])
    assert a.authorize("User:a", "h", R, T, "t")
    a.remove([b(T, "t", "User:a", R)])
    assert not a.authorize("User:a", "h", R, T, "t")


def test_filters() -> None:
    acls = [b(T, "logs-", "User:bob", W, pt=P), b(T, "orders", "User:alice", R), b(G, "g", "User:alice", R)]
    a = Authorizer(acls)
    assert len(a.bindings(AclFilter(resource_type=T))) == 2
    assert a.bindings(AclFilter(resource_type=T, name="logs-x", pattern_type=PatternType.MATCH)) == [acls[0]]
    assert len(a.bindings(AclFilter(principal="User:alice"))) == 2
    assert a.bindings(AclFilter(pattern_type=P)) == [acls[0]]


def test_file_store_roundtrip_in_kafka_layout(tmp_path: Path) -> None:
    store = FileAclStore(tmp_path / "acls.json")
    acls = [
        b(T, "logs-", "User:bob", W, pt=P),
        b(T, "orders", "User:alice", R),
        b(C, "kafka-cluster", "User:x", Operation.CLUSTER_ACTION),
    ]
    asyncio.run(store.save(acls))
    text = (tmp_path / "acls.json").read_text()
    assert (
        '"kafka-acl-extended/prefixed"' in text
        and '"permissionType": "Allow"' in text
        and '"ClusterAction"' in text
    )
    assert sorted(store.load(), key=str) == sorted(acls, key=str)


def test_ten_thousand_acls_stay_a_lookup() -> None:
    """Structural, not timed (speed lives in tests/bench): a decision probes the index a bounded number
    of times (the literal name, the wildcard, one probe per distinct prefix length) and sees exactly the
    ACLs whose pattern matches, whatever the ACL count."""
    acls = [b(T, f"topic-{i}", f"User:u{i % 100}", R) for i in range(9000)]
    acls += [b(T, f"pre{i}-", f"User:u{i}", W, pt=P) for i in range(1000)]
    a = Authorizer(acls)
    assert len(a) == 10_000
    assert a._prefix_lengths[T] == [5, 6, 7]  # "pre0-" .. "pre999-": 3 probes, not 1,000

    def brute(name: str) -> list[tuple[str, str, Operation, Permission]]:
        hits = [x for x in acls if (x.name == name if x.pattern_type is L else name.startswith(x.name))]
        return sorted((x.principal, x.host, x.operation, x.permission) for x in hits)

    for n in ["topic-0", "topic-4503", "topic-8999", "pre7-a", "pre77-b", "pre777-c", "other", "pre"]:
        assert sorted(a._acls_on(T, n)) == brute(n), n
    assert a.authorize("User:u5", "h", R, T, "topic-5") is True
    assert a.authorize("User:u5", "h", R, T, "topic-6") is False
    assert a.authorize("User:u7", "h", W, T, "pre7-anything") is True
    assert a.authorize("User:u7", "h", W, T, "pre8-anything") is False
