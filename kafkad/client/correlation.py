"""Correlation ids and the requests awaiting their answers, sans-IO.

Each request on a connection gets the next id (1, 2, ...; int32, wrapping to 0 after 2^31 - 1) and, when an
answer is expected (not a Produce with acks=0), an entry the shell chooses (the asyncio shell: the api, the
future, the deadline). A response frame starts with the id it answers; `match` returns that entry. Kafka
answers a connection's requests in order, but matching by id is as cheap and catches a confused peer: an id
nobody awaits raises UnexpectedResponse, after which the connection cannot be trusted.
"""

from __future__ import annotations

import struct
from typing import Generic, TypeVar

from kafkad.protocol import ProtocolDecodeError

T = TypeVar("T")
_CORRELATION = struct.Struct(">i")


class UnexpectedResponse(ProtocolDecodeError):
    """A response frame whose correlation id no request awaits."""

    def __init__(self, correlation_id: int) -> None:
        super().__init__(f"response with unknown correlation id {correlation_id}")
        self.correlation_id = correlation_id


class InFlight(Generic[T]):
    """The ids handed out on one connection and the entries of those still awaiting an answer.

    `entries` (id -> entry) is there to be walked (a shell's deadline check); change it through the methods.
    """

    __slots__ = ("entries", "last_id")

    def __init__(self) -> None:
        self.last_id = 0
        self.entries: dict[int, T] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def next_id(self) -> int:
        """The id of the next request (whether or not it expects an answer)."""
        self.last_id = cid = (self.last_id + 1) & 0x7FFFFFFF
        return cid

    def expect(self, correlation_id: int, entry: T) -> None:
        """The request `correlation_id` was sent and awaits an answer."""
        self.entries[correlation_id] = entry

    def match(self, frame: bytearray | bytes) -> T:
        """The entry a response frame (without size prefix, >= 4 bytes) answers, no longer awaited."""
        cid = _CORRELATION.unpack_from(frame, 0)[0]
        try:
            return self.entries.pop(cid)
        except KeyError:
            raise UnexpectedResponse(cid) from None

    def drain(self) -> list[T]:
        """Every awaited entry, now forgotten (the connection is gone; the shell fails them)."""
        entries, self.entries = self.entries, {}
        return list(entries.values())
