"""The follower's Fetch request, encoded once per partition set and then patched (a per-fetch cost cut).

A fetcher sends the same Fetch v11 over and over; only each partition's fetch_offset and log_start_offset
change (and the correlation id, which BrokerChannel.request_frame writes). `FetchTemplate` encodes the request
once through the schema codec with a distinct sentinel in each of those int64 fields, finds where each
sentinel landed, and `frame()` copies the template and packs the real offsets there: the bytes are exactly
what the codec would produce (checked by tests), at a fraction of its cost (~40 us a fetch in Python). A
template whose sentinels are not each found exactly once is not used (`ok` False; the fetcher encodes).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from kafkad.protocol import ApiKey, RequestHeader, encode_request

FETCH_VERSION = 11
_I64 = struct.Struct(">q")
_SENTINEL = 0x5A17_C0DE_0000_0000

# (topic, partition, current leader epoch) per partition, in request order
PartitionKey = tuple[str, int, int]


def fetch_body(settings: Any, partitions: Sequence[tuple[PartitionKey, int, int]]) -> dict[str, Any]:
    """Fetch v11's body: `settings` a FetcherConfig; each partition (key, fetch_offset, log_start_offset)."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index, epoch), offset, start in partitions:
        by_topic.setdefault(topic, []).append(
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
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        "forgotten_topics_data": [],
        "rack_id": settings.rack,
    }


class FetchTemplate:
    def __init__(self, settings: Any, client_id: str, keys: Sequence[PartitionKey]) -> None:
        self.keys = tuple(keys)
        sentinels = [(_SENTINEL + 2 * i, _SENTINEL + 2 * i + 1) for i in range(len(self.keys))]
        body = fetch_body(settings, [(k, o, s) for k, (o, s) in zip(self.keys, sentinels, strict=True)])
        self._frame = bytearray(
            encode_request(RequestHeader(ApiKey.FETCH, FETCH_VERSION, 0, client_id), body)
        )
        self._positions: list[int] = []
        self.ok = True
        for pair in sentinels:
            for value in pair:
                packed = _I64.pack(value)
                if self._frame.count(packed) != 1:
                    self.ok = False
                    return
                self._positions.append(self._frame.find(packed))

    def frame(self, offsets: Sequence[tuple[int, int]]) -> bytearray:
        """The request for these (fetch_offset, log_start_offset), in the order of `keys`."""
        out = bytearray(self._frame)
        positions = iter(self._positions)
        pack = _I64.pack_into
        for offset, start in offsets:
            pack(out, next(positions), offset)
            pack(out, next(positions), start)
        return out
