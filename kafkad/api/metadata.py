"""Metadata (3) v0-12: brokers, cluster id, controller, topics with partitions; auto-creates topics.

The control plane answers (standalone: this broker and its logs, cluster/local.py; ZooKeeper mode: the
controller's view in the metadata cache, cluster/metadata.py); this handler adds what does not depend on
it. Topic ids (v10+, KIP-516) come from the control plane; a topic asked for by an id no topic has (v10+,
null name) answers UNKNOWN_TOPIC_ID.

Authorized operations (v8) are the full sets when asked for (no authorizer), INT32_MIN otherwise.

__consumer_offsets is created on demand by the group coordinator: it is not listed while half made, and a
request naming it creates it like Kafka does for internal topics (whatever auto.create.topics.enable says,
if the request allows auto-creation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.security.authorized_operations import cluster_operations, topic_operations


@handler(ApiKey.METADATA, 0, 12)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    body = request.body
    plane = broker.control_plane
    answer = await plane.metadata(ctx, body)
    ops = topic_operations(bool(body.get("include_topic_authorized_operations")))
    for t in answer["topics"]:
        if "partitions" in t and not t["error_code"]:
            t["topic_authorized_operations"] = ops
    answer["cluster_authorized_operations"] = cluster_operations(
        bool(body.get("include_cluster_authorized_operations"))
    )
    if ctx.version >= 10:  # each found topic's id (KIP-516)
        for t in answer["topics"]:
            if t.get("name") is not None and t["error_code"] in (0, ErrorCode.LEADER_NOT_AVAILABLE):
                t["topic_id"] = plane.topic_id(t["name"])
    return answer
