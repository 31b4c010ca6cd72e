"""A minimal classic-protocol consumer group member for kafkad-console-consumer --group.

FindCoordinator -> JoinGroup (protocol type "consumer", the "range" assignor, ConsumerProtocol v0
subscription) -> SyncGroup (the leader computes the range assignment for every member) -> OffsetFetch for
the starting positions (no committed offset: the reset policy via ListOffsets). `tick` heartbeats every
3 s, commits positions every 5 s and rejoins when the coordinator says the group is rebalancing; `close`
commits and leaves. If the broker does not advertise the group APIs it is a clear ToolError.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.tools.client import BrokerConnection, KafkaApiError, KafkaClient, ToolError, api_name, check

if TYPE_CHECKING:
    from kafkad.tools.console_consumer import Consumer

GROUP_APIS = (
    ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT,
    ApiKey.OFFSET_FETCH, ApiKey.OFFSET_COMMIT, ApiKey.LEAVE_GROUP,
)  # fmt: skip
HEARTBEAT_S = 3.0
COMMIT_S = 5.0
_REJOIN = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)


def _str(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def encode_subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics) + struct.pack(">i", -1)


def decode_subscription(data: bytes) -> list[str]:
    n = struct.unpack_from(">i", data, 2)[0]
    pos, topics = 6, []
    for _ in range(n):
        ln = struct.unpack_from(">h", data, pos)[0]
        topics.append(data[pos + 2 : pos + 2 + ln].decode())
        pos += 2 + ln
    return topics


def encode_assignment(assignment: Mapping[str, Sequence[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: version, [(topic, [partition])], null user data."""
    parts = [struct.pack(">hi", 0, len(assignment))]
    for topic, partitions in assignment.items():
        parts.append(_str(topic) + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))
    parts.append(struct.pack(">i", -1))
    return b"".join(parts)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    if len(data) < 6:
        return {}
    n = struct.unpack_from(">i", data, 2)[0]
    pos, out = 6, {}
    for _ in range(n):
        ln = struct.unpack_from(">h", data, pos)[0]
        topic = data[pos + 2 : pos + 2 + ln].decode()
        pos += 2 + ln
        count = struct.unpack_from(">i", data, pos)[0]
        out[topic] = list(struct.unpack_from(f">{count}i", data, pos + 4))
        pos += 4 + 4 * count
    return out


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, consecutive ranges to the sorted members subscribed to it."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic, count in partitions.items():
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            out[m][topic] = list(range(start, start + n))
            start += n
    return out


class GroupMember:
    def __init__(
        self, client: KafkaClient, group_id: str, topic: str, session_timeout_ms: int = 10000
    ) -> None:
        missing = [api_name(k) for k in GROUP_APIS if not client.supports(k)]
        if missing:
            raise ToolError(
                f"The broker does not support consumer groups ({', '.join(missing)} not advertised); "
                "consume without --group (use --partition / --from-beginning)"
            )
        self.client = client
        self.group_id = group_id
        self.topic = topic
        self.session_timeout_ms = session_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.coordinator: BrokerConnection | None = None
        self._last_heartbeat = 0.0
        self._last_commit = 0.0

    def _coord(self) -> BrokerConnection:
        if self.coordinator is None:
            resp = self.client.send(ApiKey.FIND_COORDINATOR, {"key": self.group_id, "key_type": 0})
            check(resp["error_code"], f"FindCoordinator for group {self.group_id}", resp.get("error_message"))
            self.coordinator = self.client.node(resp["node_id"])
        return self.coordinator

    def join(self, consumer: Consumer) -> None:
        """(Re)join the group and set consumer.positions to this member's partitions."""
        coord = self._coord()
        while True:
            body = {
                "group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": 30000, "member_id": self.member_id, "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": encode_subscription([self.topic])}],
            }  # fmt: skip
            resp = coord.send(ApiKey.JOIN_GROUP, body)
            code = resp["error_code"]
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp["member_id"]
                continue
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            check(code, f"JoinGroup {self.group_id}")
            break
        self.member_id, self.generation = resp["member_id"], resp["generation_id"]
        assignments: list[dict[str, Any]] = []
        if resp["leader"] == self.member_id:
            subs = {m["member_id"]: decode_subscription(m["metadata"]) for m in resp["members"]}
            topics = sorted({t for ts in subs.values() for t in ts})
            md = self.client.metadata(topics)
            counts = {t: len(md.topics[t].partitions) for t in topics if t in md.topics}
            plan = range_assign(subs, counts)
            assignments = [{"member_id": m, "assignment": encode_assignment(a)} for m, a in plan.items()]
        sync = coord.send(ApiKey.SYNC_GROUP, {
            "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": None, "assignments": assignments,
        })  # fmt: skip
        if sync["error_code"] in _REJOIN:
            return self.join(consumer)
        check(sync["error_code"], f"SyncGroup {self.group_id}")
        mine = decode_assignment(sync["assignment"]).get(self.topic, [])
        consumer.positions.clear()
        self._start_positions(consumer, mine)
        self._last_heartbeat = self._last_commit = time.monotonic()

    def _start_positions(self, consumer: Consumer, partitions: list[int]) -> None:
        if not partitions:
            return
        resp = self._coord().send(ApiKey.OFFSET_FETCH, {
            "group_id": self.group_id, "topics": [{"name": self.topic, "partition_indexes": partitions}],
        })  # fmt: skip
        check(resp.get("error_code", 0), f"OffsetFetch {self.group_id}")
        committed = {
            p["partition_index"]: p["committed_offset"] for t in resp["topics"] for p in t["partitions"]
            if p["error_code"] == ErrorCode.NONE and p["committed_offset"] >= 0
        }  # fmt: skip
        need_reset = [p for p in partitions if p not in committed]
        for p in partitions:
            if p in committed:
                consumer.positions[p] = committed[p]
        if need_reset:
            consumer.seek(need_reset, consumer.reset)

    def tick(self, consumer: Consumer) -> None:
        now = time.monotonic()
        if now - self._last_commit >= COMMIT_S:
            self.commit(consumer)
        if now - self._last_heartbeat >= HEARTBEAT_S:
            self._last_heartbeat = now
            resp = self._coord().send(ApiKey.HEARTBEAT, {
                "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": None,
            })  # fmt: skip
            if resp["error_code"] in _REJOIN:
                if resp["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS:
                    self.commit(consumer)
                self.join(consumer)
            else:
                check(resp["error_code"], f"Heartbeat {self.group_id}")

    def commit(self, consumer: Consumer) -> None:
        self._last_commit = time.monotonic()
        if not consumer.positions:
            return
        resp = self._coord().send(ApiKey.OFFSET_COMMIT, {
            "group_id": self.group_id, "generation_id_or_member_epoch": self.generation,
            "member_id": self.member_id, "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": self.topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "committed_metadata": ""}
                for p, o in sorted(consumer.positions.items())
            ]}],
        })  # fmt: skip
        for t in resp["topics"]:
            for p in t["partitions"]:
                if p["error_code"] not in (ErrorCode.NONE, *_REJOIN):
                    raise KafkaApiError(
                        ErrorCode(p["error_code"]), f"OffsetCommit {self.topic}-{p['partition_index']}"
                    )

    def close(self, consumer: Consumer) -> None:
        """Commit the positions and leave the group (best effort: the session timeout covers a failure)."""
        try:
            self.commit(consumer)
            self._coord().send(ApiKey.LEAVE_GROUP, {
                "group_id": self.group_id, "member_id": self.member_id,
                "members": [{"member_id": self.member_id, "group_instance_id": None}],
            })  # fmt: skip
        except ToolError:
            pass
