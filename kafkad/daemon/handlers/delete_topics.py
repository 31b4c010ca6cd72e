"""DeleteTopics (20) v1-3: honours delete.topic.enable; files go after file.delete.delay.ms."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.daemon.broker import topic_name_error
from kafkad.daemon.handlers import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    return {
        "throttle_time_ms": 0,
        "responses": [{"name": n, "error_code": int(code)} for n in request.body["topic_names"]],
    }


@handler(ApiKey.DELETE_TOPICS, 1, 3, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    broker = ctx.broker
    if not broker.config.server.delete_topic_enable:
        return _error_body(request, ErrorCode.TOPIC_DELETION_DISABLED)
    cluster = broker.services.get("cluster")
    if cluster is not None:  # marked in /admin/delete_topics; the controller deletes (waits up to timeout_ms)
        names = list(request.body["topic_names"])
        bad = {n for n in names if topic_name_error(n)}
        codes = await cluster.delete_topics(
            [n for n in names if n not in bad], request.body["timeout_ms"] / 1000
        )
        return {
            "throttle_time_ms": 0,
            "responses": [
                {"name": n, "error_code": int(ErrorCode.INVALID_TOPIC_EXCEPTION if n in bad else codes[n])}
                for n in names
            ],
        }
    out = []
    for name in request.body["topic_names"]:
        try:
            if topic_name_error(name):
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION)
            broker.replicas.delete_topic(name)
            out.append({"name": name, "error_code": 0})
        except KafkaError as e:
            out.append({"name": name, "error_code": int(e.code)})
    return {"throttle_time_ms": 0, "responses": out}
