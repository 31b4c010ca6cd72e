"""How the LogManager opens a partition log (an injectable opener, so tests can watch recovery decisions).

`OpenRequest` carries what the log dir's checkpoints say about one partition; `default_opener` opens
kafkad's PartitionLog with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kafkad.clock import Clock
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog


@dataclass(frozen=True, slots=True)
class OpenRequest:
    """Everything needed to open one partition dir (offsets come from the log dir's checkpoints)."""

    path: Path
    topic: str
    partition: int
    config: LogConfig
    recovery_point: int
    log_start_offset: int
    high_watermark: int
    recover: bool  # False after a clean shutdown: trust the files, rebuild nothing


class LogOpener(Protocol):
    def __call__(self, req: OpenRequest, clock: Clock) -> PartitionLog:
        """Blocking: open (and with req.recover, recover) the log in req.path, creating it if new."""
        ...


def default_opener(req: OpenRequest, clock: Clock) -> PartitionLog:
    """Blocking: open kafkad's PartitionLog for `req`."""
    opened = PartitionLog.open(
        req.path,
        req.config,
        clock,
        recover=req.recover,
        topic=req.topic,
        partition=req.partition,
        recovery_point=req.recovery_point,
        log_start_offset=req.log_start_offset,
    )
    opened.high_watermark = req.high_watermark  # the setter clamps to [log start, log end]
    return opened


def release_deleted_log(plog: PartitionLog) -> None:
    """Blocking: close a deleted log's files without writing anything (its directory was renamed).

    Not PartitionLog.close(): that would flush and write a producer snapshot into the old path.
    """
    plog.release()
