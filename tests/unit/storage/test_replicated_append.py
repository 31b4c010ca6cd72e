"""A follower's append of replicated batches (log_append.append_replicated, the one-pass path) leaves the
log exactly as the general path (append_batches) does: same bytes, log end, epochs, producer state,
max timestamp and index lookups; and refuses what it refuses, with the same error codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage import log_append
from kafkad.storage.partition_log import AppendOrigin, PartitionLog
from kafkad.storage.records import SimpleRecord, build_batch
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

TS = 1_700_000_000_000


def leader_blobs(tmp_path: Path, clock: ManualClock) -> list[bytearray]:
    """What a follower fetches: several reads of a leader log with epochs 3, 4, 6, an idempotent
    producer, compressed batches and a control batch."""
    leader = open_log(tmp_path / "leader", clock)
    appends: list[tuple[int, bytes | bytearray]] = [
        (3, make_batch(3, ts=TS)),
        (3, make_batch(2, ts=TS + 50, producer_id=7, producer_epoch=0, base_sequence=0)),
        (4, make_batch(4, ts=TS + 20, compression=1)),
        (4, make_batch(1, ts=TS + 90, producer_id=7, producer_epoch=0, base_sequence=2)),
        (4, build_batch([SimpleRecord(b"\0\0\0\0", b"\0\0\0\0\0\0", timestamp=TS)], is_control=True)),
        (6, make_batch(5, ts=TS + 10)),
    ]
    cuts = []
    for epoch, batch in appends:
        leader.append(
            memoryview(bytearray(batch)), leader_epoch=epoch, now_ms=TS, origin=AppendOrigin.COORDINATOR
        )
        cuts.append(leader.log_end_offset)
    data = read_all(leader)
    blobs, pos = [], 0
    # one blob of the first two batches, one of the next three, one of the last: multi- and one-batch
    for n in (2, 3, 1):
        start = pos
        for _ in range(n):
            pos += int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
        blobs.append(bytearray(data[start:pos]))
    leader.close()
    return blobs


def state(log: PartitionLog) -> tuple[object, ...]:
    return (
        log.log_end_offset,
        read_all(log),
        log.leader_epoch_cache.entries,
        log.producer_state.sequence_state(7),
        log.active_segment.max_timestamp,
        log.offset_for_timestamp(TS + 50),
        log.offset_for_timestamp(TS + 85),
    )


def test_same_log_as_the_general_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    general_path = log_append.append_batches

    def refused(*args: object) -> object:
        raise AssertionError("the one-pass path fell back to append_batches")

    clock = ManualClock()
    blobs = leader_blobs(tmp_path, clock)
    fast, general = open_log(tmp_path / "fast", clock), open_log(tmp_path / "general", clock)
    for blob in blobs:
        a = fast.append(
            memoryview(bytearray(blob)), leader_epoch=-1, now_ms=TS, origin=AppendOrigin.REPLICATION
        )
        b = general_path(general, memoryview(bytearray(blob)), -1, TS, AppendOrigin.REPLICATION)
        assert a == b
    assert state(fast) == state(general)
    assert fast.leader_epoch_cache.entries == [(3, 0), (4, 5), (6, 11)]


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        ("crc", ErrorCode.CORRUPT_MESSAGE),
        ("partial", ErrorCode.INVALID_RECORD),
        ("again", ErrorCode.UNKNOWN_SERVER_ERROR),  # offsets below our log end
    ],
)
def test_refuses_as_the_general_path(tmp_path: Path, damage: str, code: ErrorCode) -> None:
    clock = ManualClock()
    blobs = leader_blobs(tmp_path, clock)
    log = open_log(tmp_path / "f", clock)
    log.append(memoryview(bytearray(blobs[0])), leader_epoch=-1, now_ms=TS, origin=AppendOrigin.REPLICATION)
    blob = bytearray(blobs[0] if damage == "again" else blobs[1])
    if damage == "crc":
        blob[-1] ^= 0xFF
    elif damage == "partial":
        blob = blob[:-5]
    with pytest.raises(KafkaError) as e:
        log.append(memoryview(blob), leader_epoch=-1, now_ms=TS, origin=AppendOrigin.REPLICATION)
    assert e.value.code is code
    assert log.log_end_offset == 5
