"""Values PartitionLog takes and returns (re-exported by kafkad.storage.partition_log)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from kafkad.storage.file_slice import FileSlice

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


class AppendOrigin(Enum):
    CLIENT = "client"  # producers: offsets assigned here, sequences validated
    REPLICATION = "replication"  # follower fetch: offsets and epochs come from the leader
    COORDINATOR = "coordinator"  # internal topics written by the broker itself


class AppendResult(NamedTuple):
    """One per append: a NamedTuple because building a frozen dataclass cost ~1 us on the produce path."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime
    log_start_offset: int
    duplicate: bool = False  # an idempotent retry: nothing appended, original offsets returned


@dataclass(frozen=True, slots=True)
class ReadResult:
    slices: list[FileSlice]
    size: int


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A closed segment as retention and the broker-wide disk budget see it."""

    base_offset: int
    next_offset: int  # base of the following segment
    size_bytes: int
    largest_timestamp_ms: int  # max record timestamp (file mtime if none)
