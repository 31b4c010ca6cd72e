"""ElectLeaders (43) v0-2: preferred (0) or unclean (1) leader elections (kafka-leader-election).

The control plane elects: standalone the broker leads every partition and is its only replica, so every
named partition already has its preferred leader: ELECTION_NOT_NEEDED, as Kafka answers for a partition led
by its preferred replica (and an unclean election is not needed while the leader is alive); unknown
partitions answer UNKNOWN_TOPIC_OR_PARTITION. In ZooKeeper mode it is the controller's work; a KafkaError
it raises becomes the top-level error (v1+) or every partition's error (v0). When the request names no
partitions (null: all of them) Kafka drops the ELECTION_NOT_NEEDED results from the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.network.registry import RequestContext, handler
from kafkad.protocol import ApiKey, ErrorCode, KafkaError, Request

PREFERRED = 0
UNCLEAN = 1

TopicPartition = tuple[str, int]


def _asked(request: Request) -> list[TopicPartition] | None:
    tps = request.body.get("topic_partitions")
    if tps is None:
        return None
    return [(t["topic"], p) for t in tps for p in t["partitions"]]


def _body(results: Mapping[TopicPartition, ErrorCode], messages: Mapping[TopicPartition, str]) -> list[Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_id": partition,
                "error_code": int(code),
                "error_message": messages.get((topic, partition)) if code else None,
            }
        )
    return [{"topic": t, "partition_result": parts} for t, parts in by_topic.items()]


def _error_body(request: Request, code: ErrorCode) -> Mapping[str, Any]:
    asked = _asked(request) or []
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "replica_election_results": _body(dict.fromkeys(asked, code), {}),
    }


@handler(ApiKey.ELECT_LEADERS, 0, 2, error_body=_error_body)
async def handle(ctx: RequestContext, request: Request) -> Mapping[str, Any]:
    election = request.body.get("election_type", PREFERRED) if ctx.version >= 1 else PREFERRED
    if election not in (PREFERRED, UNCLEAN):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown election type {election}")
    asked = _asked(request)
    results, messages = await ctx.broker.control_plane.elect_leaders(ctx.broker, election, asked)
    if asked is None:
        results = {tp: c for tp, c in results.items() if c is not ErrorCode.ELECTION_NOT_NEEDED}
    return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": _body(results, messages)}
