"""ApiVersions (18) v0-4: the advertised set, derived from the handler registry."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import REGISTRY, RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


@handler(ApiKey.API_VERSIONS, 0, 4)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    body = request.body
    keys = REGISTRY.api_versions()
    if ctx.version >= 3:
        name = body.get("client_software_name") or ""
        version = body.get("client_software_version") or ""
        if not (_SOFTWARE.match(name) and _SOFTWARE.match(version)):
            # Kafka answers INVALID_REQUEST and still lists its versions (librdkafka then retries v0).
            return {"error_code": int(ErrorCode.INVALID_REQUEST), "api_keys": keys, "throttle_time_ms": 0}
    return {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
