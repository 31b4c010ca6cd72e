"""DeleteGroups (42) v0-2: only Empty groups go (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND otherwise);
their offsets and metadata get tombstones in __consumer_offsets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.coordinator.group.ownership import group_error
from kafkad.coordinator.group.service import coordinator_for
from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "results": [{"group_id": g, "error_code": int(code)} for g in request.body.get("groups_names") or []],
    }


@handler(ApiKey.DELETE_GROUPS, 0, 2, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    names = [g or "" for g in request.body["groups_names"] or []]
    elsewhere = {g: code for g in names if (code := group_error(ctx.broker, g)) is not None}
    results = coordinator_for(ctx.broker).delete_groups([g for g in names if g not in elsewhere])
    results.update(elsewhere)
    return {
        "throttle_time_ms": 0,
        "results": [{"group_id": g, "error_code": int(results[g])} for g in names],
    }
