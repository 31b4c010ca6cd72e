"""What handlers call to authorize a request: the principal and host of a request context, and checks.

`broker.authorizer` is None unless authorizer.class.name is set; then every check is one attribute read
and (cached) dict lookup. PLAINTEXT connections have no session: their principal is User:ANONYMOUS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkad.protocol import ErrorCode, KafkaError
from kafkad.security.acl import CLUSTER_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from kafkad.network.registry import RequestContext

ANONYMOUS = "User:ANONYMOUS"


def principal(ctx: RequestContext) -> str:
    s = ctx.session
    return ANONYMOUS if s is None else str(s.principal)


def host(ctx: RequestContext) -> str:
    peer = ctx.peer
    h = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return h[1:-1] if h.startswith("[") else h


def allowed(ctx: RequestContext, op: Operation, rtype: ResourceType, name: str) -> bool:
    authz = ctx.broker.authorizer
    return authz is None or authz.authorize(principal(ctx), host(ctx), op, rtype, name)


def topic_allowed(ctx: RequestContext, op: Operation, topic: str) -> bool:
    authz = ctx.broker.authorizer
    return authz is None or authz.authorize(principal(ctx), host(ctx), op, ResourceType.TOPIC, topic)


def require_cluster(ctx: RequestContext, op: Operation) -> None:
    """Raise CLUSTER_AUTHORIZATION_FAILED unless `op` is allowed on the cluster."""
    if not allowed(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME):
        raise KafkaError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{principal(ctx)} may not {op.name} the cluster"
        )


def require_group(ctx: RequestContext, op: Operation, group: str) -> None:
    if not allowed(ctx, op, ResourceType.GROUP, group):
        raise KafkaError(
            ErrorCode.GROUP_AUTHORIZATION_FAILED, f"{principal(ctx)} may not {op.name} group {group}"
        )
