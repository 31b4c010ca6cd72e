"""Broker-wide storage settings for the LogManager (Kafka's `log.*` broker keys, plus kafkad's disk budget)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    """Settings that apply to all of `log.dirs` (per-topic settings live in LogConfig).

    The daemon's properties table builds this; defaults follow Kafka where Kafka has the key.
    """

    log_dirs: tuple[str, ...]
    # kafkad-only disk budget: -1 = no byte cap; min free percent of each log dir's filesystem (0 = none).
    log_dirs_max_bytes: int = -1
    log_dirs_min_free_percent: float = 0.0
    # log.retention.check.interval.ms: how often the daemon calls retention_pass and the budget pass.
    retention_check_interval_ms: int = 300_000
    # log.flush.scheduler.interval.ms: how often the daemon calls flush_pass (Kafka's default: never).
    flush_scheduler_interval_ms: int = 2**63 - 1
    # log.flush.offset.checkpoint.interval.ms / log.flush.start.offset.checkpoint.interval.ms
    flush_checkpoint_interval_ms: int = 60_000
    # log.recovery.point.flush.ms (kafkad): age of unflushed data the background flusher fsyncs and
    # checkpoints, bounding what a crash recovery CRC-checks; 0 = never (Kafka: only rolls, flush.*).
    recovery_point_flush_ms: int = 0
    # file.delete.delay.ms (topic-level in Kafka; the broker default applies to deleted topic dirs).
    file_delete_delay_ms: int = 60_000
    # num.recovery.threads.per.data.dir
    num_recovery_threads: int = 2

    def __post_init__(self) -> None:
        if not self.log_dirs:
            raise ValueError("log.dirs must name at least one directory")
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise ValueError(f"log.dirs lists a directory twice: {','.join(self.log_dirs)}")
        if self.log_dirs_max_bytes < -1 or self.log_dirs_max_bytes == 0:
            raise ValueError("log.dirs.max.bytes must be -1 (no cap) or positive")
        if not 0.0 <= self.log_dirs_min_free_percent < 100.0:
            raise ValueError("log.dirs.min.free.percent must be in [0, 100)")
        if self.num_recovery_threads < 1:
            raise ValueError("num.recovery.threads.per.data.dir must be >= 1")
        if self.recovery_point_flush_ms < 0:
            raise ValueError("log.recovery.point.flush.ms must be >= 0")
        if self.file_delete_delay_ms < 0:
            raise ValueError("file.delete.delay.ms must be >= 0")
