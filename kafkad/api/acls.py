"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31) v0-3, as kafka-acls uses them.

DESCRIBE on the cluster to list, ALTER on the cluster to change. Without an authorizer all three answer
SECURITY_DISABLED, as Kafka does. Changes are stored (kafkad.security.acl_store) before the authorizer's
index sees them; a store failure answers UNKNOWN_SERVER_ERROR and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from kafkad.security.authz import require_cluster

_DISABLED = "No Authorizer is configured on the broker"


def _describe_error(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": code.name, "resources": []}


def _filter(f: Mapping[str, Any]) -> AclFilter:
    return AclFilter(
        ResourceType(f["resource_type_filter"]),
        f["resource_name_filter"],
        PatternType(f.get("pattern_type_filter", 3)),
        f["principal_filter"],
        f["host_filter"],
        Operation(f["operation"]),
        Permission(f["permission_type"]),
    )


def _acl_entry(b: AclBinding) -> dict[str, Any]:
    return {
        "principal": b.principal,
        "host": b.host,
        "operation": int(b.operation),
        "permission_type": int(b.permission),
    }


@handler(ApiKey.DESCRIBE_ACLS, 0, 3, error_body=_describe_error)
async def describe(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    authz = ctx.broker.authorizer
    if authz is None:
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.SECURITY_DISABLED),
            "error_message": _DISABLED,
            "resources": [],
        }
    require_cluster(ctx, Operation.DESCRIBE)
    try:
        flt = _filter(request.body)
    except ValueError as e:
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.INVALID_REQUEST),
            "error_message": str(e),
            "resources": [],
        }
    groups: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in sorted(
        authz.bindings(flt), key=lambda b: (b.resource_type, b.name, b.pattern_type, b.principal)
    ):
        groups.setdefault((b.resource_type, b.name, b.pattern_type), []).append(_acl_entry(b))
    resources = [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
        for (t, n, p), acls in groups.items()
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": resources}


def _binding(c: Mapping[str, Any]) -> AclBinding | str:
    """A creation as a binding, or why it is invalid (Kafka's checks)."""
    try:
        b = AclBinding(
            ResourceType(c["resource_type"]),
            c["resource_name"],
            PatternType(c.get("resource_pattern_type", 3)),
            c["principal"],
            c["host"],
            Operation(c["operation"]),
            Permission(c["permission_type"]),
        )
    except ValueError as e:
        return str(e)
    if b.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return "Invalid resource type"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid pattern type (LITERAL or PREFIXED)"
    if b.operation in (Operation.ANY, Operation.UNKNOWN) or b.permission in (
        Permission.ANY,
        Permission.UNKNOWN,
    ):
        return "Invalid operation or permission type"
    if not b.name or ":" not in b.principal:
        return "Invalid resource name or principal (Type:name)"
    if b.resource_type is ResourceType.CLUSTER and b.name != "kafka-cluster":
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    return b


async def _store(ctx: RequestContext, bindings: list[AclBinding]) -> None:
    await ctx.broker.security_runtime().acl_store.save(bindings)


def _create_error(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    n = len(request.body.get("creations", ()))
    return {"throttle_time_ms": 0, "results": [{"error_code": int(code), "error_message": None}] * n}


@handler(ApiKey.CREATE_ACLS, 0, 3, error_body=_create_error)
async def create(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    authz = ctx.broker.authorizer
    creations = request.body.get("creations", [])
    if authz is None:
        return _create_error(request, ErrorCode.SECURITY_DISABLED)
    require_cluster(ctx, Operation.ALTER)
    results: list[dict[str, Any]] = []
    new: list[AclBinding] = []
    for c in creations:
        b = _binding(c)
        if isinstance(b, str):
            results.append({"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": b})
        else:
            new.append(b)
            results.append({"error_code": 0, "error_message": None})
    if new:
        existing = authz.bindings()
        have = set(existing)
        await _store(ctx, existing + [b for b in dict.fromkeys(new) if b not in have])
        authz.add(new)
    return {"throttle_time_ms": 0, "results": results}


def _delete_error(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    n = len(request.body.get("filters", ()))
    return {
        "throttle_time_ms": 0,
        "filter_results": [{"error_code": int(code), "error_message": None, "matching_acls": []}] * n,
    }


@handler(ApiKey.DELETE_ACLS, 0, 3, error_body=_delete_error)
async def delete(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    authz = ctx.broker.authorizer
    if authz is None:
        return _delete_error(request, ErrorCode.SECURITY_DISABLED)
    require_cluster(ctx, Operation.ALTER)
    current = authz.bindings()
    doomed: set[AclBinding] = set()
    results: list[dict[str, Any]] = []
    for f in request.body.get("filters", []):
        try:
            flt = _filter(f)
        except ValueError as e:
            results.append(
                {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": str(e), "matching_acls": []}
            )
            continue
        matched = [b for b in current if flt.matches(b)]
        doomed.update(matched)
        results.append(
            {
                "error_code": 0,
                "error_message": None,
                "matching_acls": [
                    {"error_code": 0, "error_message": None, "resource_type": int(b.resource_type),
                     "resource_name": b.name, "pattern_type": int(b.pattern_type), **_acl_entry(b)}
                    for b in matched
                ],
            }
        )  # fmt: skip
    if doomed:
        await _store(ctx, [b for b in current if b not in doomed])
        authz.remove(doomed)
    return {"throttle_time_ms": 0, "filter_results": results}
