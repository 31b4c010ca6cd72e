"""Shared helpers for the storage tests (no tests here): batches built by kafka-python, a log factory."""

from __future__ import annotations

from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkad.clock import ManualClock
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog


def make_batch(
    count: int = 1,
    *,
    ts: int = 1_700_000_000_000,
    value_size: int = 10,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    tag: int = 0,
) -> bytearray:
    """A v2 batch of `count` records built by kafka-python's DefaultRecordBatchBuilder (baseOffset 0)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i in range(count):
        value = (f"{tag}:{i}:".encode() + b"x" * value_size)[: max(value_size, 1)]
        builder.append(i, timestamp=ts + i, key=None, value=value, headers=[])
    return bytearray(builder.build())


def open_log(path: Path, clock: ManualClock, **overrides: str) -> PartitionLog:
    """A clean open of `path`/t-0 with topic overrides (dotted keys via **{...})."""
    config = LogConfig().with_overrides(overrides)
    return PartitionLog.open(path / "t-0", config, clock, recover=False)


def read_all(log: PartitionLog, offset: int = 0, max_offset: int | None = None) -> bytes:
    """Every byte readable from `offset` on, following segments."""
    out = bytearray()
    while True:
        if offset >= (log.log_end_offset if max_offset is None else max_offset):
            return bytes(out)
        result = log.read(offset, 1 << 30, max_offset=max_offset)
        if not result.slices:
            return bytes(out)
        data = result.slices[0].read()
        out += data
        # advance past the last whole batch
        pos = 0
        last = offset
        while pos + 61 <= len(data):
            base = int.from_bytes(data[pos : pos + 8], "big", signed=True)
            length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
            delta = int.from_bytes(data[pos + 23 : pos + 27], "big", signed=True)
            last = base + delta + 1
            pos += length + 12
        offset = last
