"""replication/txn_markers.write_markers on a broker's real partitions: the marker is appended on the
leader, answered after the ISR has it, an error per partition otherwise; for __consumer_offsets the
group coordinator's on_txn_marker hears of a marker once it is replicated, never of a failed one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kafkad.protocol import ErrorCode
from kafkad.replication.txn_markers import TxnMarker, write_markers
from kafkad.storage.records import SimpleRecord, build_batch
from tests.unit.daemon.test_handlers import create, make_broker

PID = 41
OFFSETS = "__consumer_offsets"


class RecordingGroups:
    """The group coordinator service's marker hook (txn-groups' interface), recording its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, bool]] = []

    def on_txn_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        self.calls.append((partition, producer_id, committed))


def open_txn(b: object, topic: str, index: int) -> None:
    part = b.replicas.get_or_raise(topic, index)  # type: ignore[attr-defined]
    raw = build_batch(
        [SimpleRecord(b"k", b"v", timestamp=1)],
        producer_id=PID,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    part.append_as_leader(memoryview(bytearray(raw)), now_ms=1, required_acks=1)


def test_markers_end_transactions_and_answer_per_partition(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t", 2)
    create(b, OFFSETS, 1)
    groups = RecordingGroups()
    b.group_coordinator = groups  # type: ignore[assignment]
    for topic, index in (("t", 0), ("t", 1), (OFFSETS, 0)):
        open_txn(b, topic, index)
    part = b.replicas.get_or_raise("t", 0)
    assert part.last_stable_offset == 0
    markers = [
        TxnMarker(PID, 0, False, 3, [("t", 0), ("t", 9), (OFFSETS, 0)]),
        (PID, -1, True, 3, [("t", 1)]),  # a plain tuple works too; an older producer epoch is refused
    ]
    out = asyncio.run(write_markers(b, markers))
    assert out == {
        (PID, "t", 0): ErrorCode.NONE,
        (PID, "t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (PID, OFFSETS, 0): ErrorCode.NONE,
        (PID, "t", 1): ErrorCode.INVALID_PRODUCER_EPOCH,
    }
    assert (part.high_watermark, part.last_stable_offset) == (2, 2)
    read = part.read_records(0, 1 << 20, min_one_batch=True, stable_only=True)
    assert [(t.producer_id, t.first_offset) for t in part.aborted_txns(0, read)] == [(PID, 0)]
    assert b.replicas.get_or_raise("t", 1).last_stable_offset == 0  # still open
    assert groups.calls == [(0, PID, False)]


def test_offsets_marker_reaches_the_group_coordinator_once_replicated(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, OFFSETS, 1)
    groups = RecordingGroups()
    b.group_coordinator = groups  # type: ignore[assignment]
    open_txn(b, OFFSETS, 0)
    part = b.replicas.get_or_raise(OFFSETS, 0)
    part.become_leader(1, isr=(b.broker_id, 2), replicas=(b.broker_id, 2))
    part.update_follower_position(2, part.log_end_offset)  # the follower has the data, not the marker

    async def go() -> dict[tuple[int, str, int], ErrorCode]:
        task = asyncio.ensure_future(write_markers(b, [TxnMarker(PID, 0, True, 0, [(OFFSETS, 0)])]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done() and groups.calls == []  # appended, waiting for the ISR
        part.update_follower_position(2, part.log_end_offset)
        return await task

    assert asyncio.run(go()) == {(PID, OFFSETS, 0): ErrorCode.NONE}
    assert groups.calls == [(0, PID, True)]
