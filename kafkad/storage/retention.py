"""Time- and size-based retention of one log, as Kafka's `UnifiedLog.deleteOldSegments` decides it.

Pure and loop-safe. Whole closed segments only, oldest first, and only a prefix of the log: the first
segment that must stay stops the scan. A segment goes if any of these holds:
* it lies wholly below the log start offset (DeleteRecords moved the start);
* retention.ms >= 0 and its max timestamp is older than now - retention.ms;
* retention.bytes >= 0 and the log minus this segment is still at least retention.bytes.
Nothing at or above the high watermark goes (followers and consumers may not have it yet).
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkad.storage.log_config import LogConfig
from kafkad.storage.managed_log import SegmentInfo


def retention_cutoff(
    closed: Sequence[SegmentInfo],
    config: LogConfig,
    *,
    size_bytes: int,
    high_watermark: int,
    log_start_offset: int,
    now_ms: int,
) -> int:
    """The base offset of the newest segment to delete (it and all older ones), or -1 for none."""
    if not config.delete_enabled:
        return -1
    upto = -1
    excess = size_bytes - config.retention_bytes if config.retention_bytes >= 0 else -1
    for seg in closed:
        if seg.next_offset > high_watermark:
            break
        by_start = seg.next_offset <= log_start_offset
        by_time = config.retention_ms >= 0 and now_ms - seg.max_timestamp_ms > config.retention_ms
        by_size = excess >= seg.size_bytes
        if not (by_start or by_time or by_size):
            break
        excess -= seg.size_bytes
        upto = seg.base_offset
    return upto
