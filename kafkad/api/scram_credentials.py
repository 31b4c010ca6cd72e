"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) v0, as kafka-configs uses them.

The client sends the salt and the PBKDF2-salted password (never the password); the broker derives
stored_key and server_key and stores them like Kafka (kafkad.security.credentials). Kafka's checks:
mechanism 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512), iterations in [4096, 16384], a non-empty user, a user
not both deleted and upserted in one request, deletions of existing credentials only. DESCRIBE / ALTER on
the cluster when an authorizer is configured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.security.acl import Operation
from kafkad.security.authz import require_cluster

# kafkad.security.scram (hashlib, hmac, secrets) is imported by the requests that use it: a broker
# without SASL listeners that is never asked about credentials does not load it.


def _store(ctx: RequestContext) -> Any:
    return ctx.broker.security_runtime().credentials


def _describe_error(_request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": code.name, "results": []}


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, error_body=_describe_error)
async def describe(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    from kafkad.security.scram import MECHANISM_IDS

    require_cluster(ctx, Operation.DESCRIBE)
    ids = {v: k for k, v in MECHANISM_IDS.items()}
    known = _store(ctx).describe()
    users = request.body.get("users")
    names = sorted(known) if users is None else [u["name"] for u in users]
    results = []
    seen: set[str] = set()
    for name in names:
        if name in seen:
            results.append(_result(name, ErrorCode.DUPLICATE_RESOURCE, f"Cannot describe user {name} twice"))
            continue
        seen.add(name)
        mechs = known.get(name)
        if not mechs:
            results.append(
                _result(
                    name,
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"Attempt to describe a user credential that does not exist: {name}",
                )
            )
            continue
        results.append(
            {
                **_result(name, None, None),
                "credential_infos": [
                    {"mechanism": ids[m], "iterations": it} for m, it in sorted(mechs.items())
                ],
            }
        )
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


def _result(user: str, code: ErrorCode | None, message: str | None) -> dict[str, Any]:
    return {"user": user, "error_code": int(code or 0), "error_message": message, "credential_infos": []}


def _common_error(name: str, mech: str | None) -> tuple[ErrorCode, str] | None:
    if not name:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if mech is None:
        return (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


def _alter_error(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    names = {d["name"] for d in request.body.get("deletions", ())} | {
        u["name"] for u in request.body.get("upsertions", ())
    }
    return {
        "throttle_time_ms": 0,
        "results": [{"user": n, "error_code": int(code), "error_message": None} for n in sorted(names)],
    }


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, error_body=_alter_error)
async def alter(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    from kafkad.security.scram import MAX_ITERATIONS, MECHANISM_IDS, MIN_ITERATIONS, credential_from_salted

    require_cluster(ctx, Operation.ALTER)
    store = _store(ctx)
    body = request.body
    deletions, upsertions = body.get("deletions", []), body.get("upsertions", [])
    errors: dict[str, tuple[ErrorCode, str]] = {}
    deleted = {d["name"] for d in deletions}
    upserted = {u["name"] for u in upsertions}
    for name in deleted & upserted:
        errors[name] = (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
    known = store.describe()
    dels: list[tuple[str, str]] = []
    ups: list[tuple[str, str, Any]] = []
    for d in deletions:
        name, mech = d["name"], MECHANISM_IDS.get(d["mechanism"])
        err = errors.get(name) or _common_error(name, mech)
        if err is None and mech not in known.get(name, {}):
            err = (
                ErrorCode.RESOURCE_NOT_FOUND,
                f"Attempt to delete a user credential that does not exist: {name} {mech}",
            )
        if err is not None:
            errors[name] = err
        else:
            assert mech is not None
            dels.append((name, mech))
    for u in upsertions:
        name, mech, iterations = u["name"], MECHANISM_IDS.get(u["mechanism"]), u["iterations"]
        err = errors.get(name) or _common_error(name, mech)
        if err is None and not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            err = (
                ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"Iterations {iterations} must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}] for {mech}",
            )
        if err is None and (not u["salt"] or not u["salted_password"]):
            err = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        if err is not None:
            errors[name] = err
        else:
            assert mech is not None
            ups.append(
                (
                    name,
                    mech,
                    credential_from_salted(mech, bytes(u["salted_password"]), bytes(u["salt"]), iterations),
                )
            )
    # A user with any error has none of its changes applied (Kafka validates per user).
    dels = [d for d in dels if d[0] not in errors]
    ups = [u for u in ups if u[0] not in errors]
    if dels or ups:
        await store.alter(ups, dels)
    results = []
    for name in sorted(deleted | upserted):
        code, msg = errors.get(name, (ErrorCode.NONE, None))
        results.append({"user": name, "error_code": int(code), "error_message": msg})
    return {"throttle_time_ms": 0, "results": results}
