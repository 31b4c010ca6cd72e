"""Offline partitions: one partition whose files fail takes itself out, never the broker (Kafka's offline log dir,
per partition here).

A partition whose files cannot be loaded at start (unreadable, permission denied, an I/O error, an index
that cannot be rebuilt) or that hits an I/O error at runtime (append, read, fsync) is recorded as an
`OfflineLog`: it answers KAFKA_STORAGE_ERROR, shows in Metadata as an offline replica, is exported as a
metric and is named in one ERROR log line with the file that failed, while every other partition serves.
Its offsets as last known are kept, so checkpoints still carry them; its files are not touched again
until the next start (which tries to load it again: a repaired disk brings it back).

`LogIOError` is the KAFKA_STORAGE_ERROR a storage call raises for an OSError, with the file and whether
the condition is transient: a full disk or quota (ENOSPC, EDQUOT, EFBIG) is the disk budget's business,
answered per request while the partition stays online; anything else takes the partition offline.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kafkad.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")
TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class LogIOError(KafkaError):
    """KAFKA_STORAGE_ERROR for an OSError on `path`; `transient` unless the file may now be inconsistent."""

    def __init__(self, path: os.PathLike[str] | str, exc: OSError, *, transient: bool | None = None) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, f"{path}: {exc.strerror or exc}")
        self.path = str(path)
        self.errno = exc.errno
        self.transient = exc.errno in TRANSIENT_ERRNOS if transient is None else transient


def is_transient(exc: BaseException) -> bool:
    """Whether a storage failure leaves the partition consistent (full disk): it stays online then."""
    if isinstance(exc, LogIOError):
        return exc.transient
    return isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS


@dataclass(frozen=True, slots=True)
class OfflineLog:
    """A partition taken offline: which file failed and why, and its offsets as last known."""

    topic: str
    partition: int
    log_dir: str
    path: str  # the file (or the partition directory) that failed
    reason: str
    recovery_point: int = 0
    log_start_offset: int = 0
    high_watermark: int = 0


_PATH_IN_MESSAGE = re.compile(r"(/\S+?):(?:\s|$)")


def failed_file(exc: BaseException, default: os.PathLike[str] | str) -> str:
    """The file an exception names (OSError.filename, a LogIOError's path, a KafkaError message that
    starts with a path), else `default` (the partition directory)."""
    if isinstance(exc, LogIOError):
        return exc.path
    if isinstance(exc, OSError) and exc.filename:
        return os.fsdecode(exc.filename)
    if isinstance(exc, KafkaError) and exc.message:
        found = _PATH_IN_MESSAGE.match(exc.message)
        if found:
            return found.group(1)
    return os.fspath(default)


def describe(exc: BaseException) -> str:
    """One line for the log: the error without its traceback."""
    if isinstance(exc, OSError):
        return f"{exc.strerror or type(exc).__name__} (errno {exc.errno})"
    if isinstance(exc, KafkaError):
        return f"{exc.code.name}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


class Offsets(Protocol):
    """What the offset checkpoints need of a partition (its log, or its OfflineLog)."""

    @property
    def recovery_point(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...


def attempt(fn: Callable[[T], object]) -> Callable[[T], tuple[T, Exception | None]]:
    """`fn` made to return (its argument, the exception it raised or None): one partition's failure
    must not stop a pass over the others (shutdown's flush and close)."""

    def run(plog: T) -> tuple[T, Exception | None]:
        try:
            fn(plog)
        except Exception as exc:  # one partition's disk error must not stop the others' shutdown
            return plog, exc
        return plog, None

    return run
