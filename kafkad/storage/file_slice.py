"""A byte range of an open segment file: what reads return and the connection writer sendfiles."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FileSlice:
    """`size` bytes of file descriptor `fd` from `position` (satisfies protocol.RecordsRef).

    The fd belongs to a segment; it stays open at least file.delete.delay.ms after the segment is
    deleted, so a response being sent when retention runs still reads valid bytes.
    """

    fd: int
    position: int
    size: int

    def read(self) -> bytes:
        """Blocking pread of the bytes (tests, tools and non-sendfile paths)."""
        return os.pread(self.fd, self.size, self.position)
