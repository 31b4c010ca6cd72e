"""Write real Kafka segment directories with the records builder (shared by the bridge's test tiers)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kafkad.storage.records import (
    Compression,
    ControlRecordType,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_control_batch,
)

BASE_TS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class Expected:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def make_record(topic: str, partition: int, offset: int, ts: int, value_size: int = 40) -> SimpleRecord:
    key = None if offset % 7 == 3 else f"{topic}-{partition}-k{offset}".encode()
    value = None if offset % 11 == 5 else (f"v{offset}:".encode() + bytes([offset % 251]) * value_size)
    headers: tuple[tuple[str, bytes | None], ...] = ()
    if offset % 5 == 0:
        headers = (("h1", f"x{offset}".encode()), ("h2", None))
    return SimpleRecord(key=key, value=value, headers=headers, timestamp=ts)


def write_partition(
    log_dir: Path,
    topic: str,
    partition: int,
    *,
    segments: int,
    batches_per_segment: int,
    records_per_batch: int,
    codecs: tuple[Compression, ...] = tuple(Compression),
    with_control: bool = True,
    ts_step_ms: int = 3_600_000,
) -> list[Expected]:
    """`segments` closed .log files plus an empty active one after them; returns the closed records."""
    pdir = log_dir / f"{topic}-{partition}"
    pdir.mkdir(parents=True, exist_ok=True)
    expected: list[Expected] = []
    offset = 0
    ts = BASE_TS
    n = 0
    for _s in range(segments):
        base = offset
        out = bytearray()
        for b in range(batches_per_segment):
            if with_control and b == 1:
                out += build_control_batch(
                    ControlRecordType.COMMIT,
                    producer_id=7,
                    producer_epoch=0,
                    coordinator_epoch=1,
                    timestamp=ts,
                    base_offset=offset,
                )
                offset += 1
                continue
            recs: list[SimpleRecord] = []
            for _ in range(records_per_batch):
                recs.append(make_record(topic, partition, offset + len(recs), ts))
                ts += ts_step_ms
            lat = n % 9 == 4
            out += build_batch(
                recs,
                compression=codecs[n % len(codecs)],
                base_offset=offset,
                timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
            )
            for i, r in enumerate(recs):
                rts = max(x.timestamp for x in recs) if lat else r.timestamp
                expected.append(Expected(topic, partition, offset + i, rts, r.key, r.value, r.headers))
            offset += len(recs)
            n += 1
        (pdir / f"{base:020d}.log").write_bytes(bytes(out))
    (pdir / f"{offset:020d}.log").write_bytes(b"")
    return expected
