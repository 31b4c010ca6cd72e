"""The follower's Fetch v11 request, encoded without the schema codec (a per-fetch cost cut).

A fetcher sends the same Fetch v11 over and over, with its partitions in an order that changes: as Kafka's
AbstractFetcherThread (PartitionStates.updateAndMoveToEnd), a partition that returned records moves to the
end of the next request, so with max_bytes reached the partitions left out are asked first next time and
none starves. `FetchEncoder` takes the constant head (header and body fields before `topics`) and tail
(`forgotten_topics_data`, `rack_id`) from one codec encoding with no topics, and writes the topics array
itself: per run of consecutive partitions of one topic, the topic's name (cached) and its partitions, each
one struct pack. Partitions of a topic that are not consecutive make the topic appear twice, as in Kafka's
FetchRequest.Builder; the leader answers each entry. The bytes equal the codec's for the same body (tests);
an encoder whose self-check at construction disagrees is not used (`ok` False; the fetcher encodes).
The fetch session's id and epoch (fetch_session_handler.py) are written into the head per frame.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from kafkad.protocol import ApiKey, RequestHeader, encode_request

FETCH_VERSION = 11
_I32 = struct.Struct(">i")
_SESSION = struct.Struct(">ii")  # session_id, session_epoch (KIP-227)
_PARTITION = struct.Struct(">iiqqi")  # partition, current_leader_epoch, fetch_offset, log_start, max_bytes

# (topic, partition, current leader epoch, fetch_offset, log_start_offset) per partition, in request order
FetchPartition = tuple[str, int, int, int, int]


def fetch_body(
    settings: Any, partitions: Sequence[FetchPartition], session_id: int = 0, session_epoch: int = -1
) -> dict[str, Any]:
    """Fetch v11's body (`settings` a FetcherConfig) with the partitions in this order; a topic's
    consecutive partitions share one topic entry. Session 0 / epoch -1: sessionless (KIP-227)."""
    topics: list[dict[str, Any]] = []
    current: list[dict[str, Any]] | None = None
    last = None
    for topic, index, epoch, offset, start in partitions:
        if topic != last or current is None:
            current = []
            topics.append({"topic": topic, "partitions": current})
            last = topic
        current.append(
            {
                "partition": index,
                "current_leader_epoch": epoch,
                "fetch_offset": offset,
                "log_start_offset": start,
                "partition_max_bytes": settings.partition_max_bytes,
            }
        )
    return {
        "replica_id": settings.broker_id,
        "max_wait_ms": settings.max_wait_ms,
        "min_bytes": settings.min_bytes,
        "max_bytes": settings.response_max_bytes,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": session_epoch,
        "topics": topics,
        "forgotten_topics_data": [],
        "rack_id": settings.rack,
    }


def _codec_frame(
    settings: Any, client_id: str, partitions: Sequence[FetchPartition], session: tuple[int, int] = (0, -1)
) -> bytes:
    header = RequestHeader(ApiKey.FETCH, FETCH_VERSION, 0, client_id)
    return encode_request(header, fetch_body(settings, partitions, *session))


class FetchEncoder:
    """Encodes the fetcher's Fetch v11 frames (size prefix included, correlation id 0: BrokerChannel
    .request_raw writes it) for any partitions in any order."""

    def __init__(self, settings: Any, client_id: str) -> None:
        self._max_bytes = int(settings.partition_max_bytes)
        rack = settings.rack.encode()
        self._tail = _I32.pack(0) + struct.pack(">h", len(rack)) + rack  # forgotten_topics_data, rack_id
        empty = _codec_frame(settings, client_id, ())
        self._head = empty[4 : len(empty) - len(self._tail) - 4]  # without size prefix and topic count
        self._names: dict[str, bytes] = {}
        probe = [("t", 1, 2, 3, 4), ("t", 0, -1, 5, 0), ("u", 7, 1, 1 << 40, 9), ("t", 2, 0, 0, 0)]
        self._session_at = 4 + len(self._head) - _SESSION.size  # session_id, session_epoch end the head
        self.ok = (
            empty.endswith(self._tail)
            and bytes(self.frame(probe)) == _codec_frame(settings, client_id, probe)
            and bytes(self.frame(probe, 12345, 7)) == _codec_frame(settings, client_id, probe, (12345, 7))
        )

    def _name(self, topic: str) -> bytes:
        name = self._names.get(topic)
        if name is None:
            raw = topic.encode()
            name = self._names[topic] = struct.pack(">h", len(raw)) + raw
        return name

    def frame(
        self, partitions: Sequence[FetchPartition], session_id: int = 0, session_epoch: int = -1
    ) -> bytearray:
        pack = _PARTITION.pack
        max_bytes = self._max_bytes
        chunks: list[bytes] = [b"\0\0\0\0", self._head, b""]
        topics = 0
        count_at = -1
        count = 0
        last = None
        for topic, index, epoch, offset, start in partitions:
            if topic != last:
                if count_at >= 0:
                    chunks[count_at] = _I32.pack(count)
                chunks.append(self._name(topic))
                count_at = len(chunks)
                chunks.append(b"")
                count = 0
                topics += 1
                last = topic
            chunks.append(pack(index, epoch, offset, start, max_bytes))
            count += 1
        if count_at >= 0:
            chunks[count_at] = _I32.pack(count)
        chunks[2] = _I32.pack(topics)
        chunks.append(self._tail)
        out = bytearray().join(chunks)
        _I32.pack_into(out, 0, len(out) - 4)
        if session_id or session_epoch != -1:
            _SESSION.pack_into(out, self._session_at, session_id, session_epoch)
        return out
