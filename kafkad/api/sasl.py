"""SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-2, driving the connection's security Session.

On a PLAINTEXT or SSL listener (no SASL) both answer ILLEGAL_SASL_STATE, as Kafka does. A mechanism the
listener does not enable answers UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection
closes; failed credentials answer SASL_AUTHENTICATION_FAILED, then it closes (Session.close_after).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request


@handler(ApiKey.SASL_HANDSHAKE, 0, 1)
async def handshake(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    session = ctx.session
    if session is None or not session.sasl:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}
    mechanisms = list(session.mechanisms)
    if not session.handshake(request.body["mechanism"], ctx.version):
        return {"error_code": int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "mechanisms": mechanisms}
    return {"error_code": 0, "mechanisms": mechanisms}


@handler(ApiKey.SASL_AUTHENTICATE, 0, 2)
async def authenticate(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    from kafkad.security.session import AuthFailed

    session = ctx.session
    if session is None or not session.sasl:
        return _failed(ErrorCode.ILLEGAL_SASL_STATE, "SASL is not enabled on this listener")
    try:
        challenge, lifetime = session.authenticate(bytes(request.body["auth_bytes"]))
    except AuthFailed as e:
        session.close_after = True
        mech = session.mechanism or "?"
        return _failed(
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mech}"
            if "credentials" in str(e) or "password" in str(e)
            else str(e),
        )
    return {"error_code": 0, "error_message": None, "auth_bytes": challenge, "session_lifetime_ms": lifetime}


def _failed(code: ErrorCode, message: str) -> Mapping[str, Any]:
    return {"error_code": int(code), "error_message": message, "auth_bytes": b"", "session_lifetime_ms": 0}
