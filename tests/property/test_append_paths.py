"""PartitionLog.append's inline single-batch path must behave exactly as the general path.

Two logs get the same appends: one through `append` (which takes the inline path whenever the batch
qualifies), the twin through `_append_batches` (the general path, always). Header bytes are mutated at
random, so CRC, magic, counts, codec, control flag, producer id, lengths and timestamps all vary; the
outcomes (result or error code) and the stored bytes, indexes and log state must be identical.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkad.clock import ManualClock
from kafkad.protocol.errors import KafkaError
from kafkad.storage.partition_log import AppendOrigin, AppendResult, PartitionLog
from kafkad.storage.records.batch import rewrite_crc
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all

NOW = 1_700_000_000_000
CONFIGS = [
    {"segment.bytes": "2048", "index.interval.bytes": "100"},
    {"segment.bytes": "2048", "message.timestamp.difference.max.ms": "1000"},
    {"max.message.bytes": "300", "segment.index.bytes": "32", "index.interval.bytes": "50"},
    {"message.timestamp.type": "LogAppendTime"},
    {"segment.ms": "50"},
]

mutation = st.tuples(st.integers(0, 60), st.integers(0, 255), st.booleans())  # (byte, value, fix CRC)
append = st.fixed_dictionaries(
    {
        "count": st.integers(1, 4),
        "value_size": st.integers(1, 400),
        "ts_offset": st.sampled_from([0, 10, -5000, 5000]),
        "producer_id": st.sampled_from([-1, -1, 7]),
        "mutations": st.lists(mutation, max_size=2),
        "advance": st.integers(0, 40),
        "origin": st.sampled_from([AppendOrigin.CLIENT, AppendOrigin.CLIENT, AppendOrigin.COORDINATOR]),
        "retry": st.booleans(),  # resend the last accepted idempotent batch (a duplicate)
    }
)


def _outcome(log: PartitionLog, inline: bool, buf: bytearray, now: int, origin: AppendOrigin) -> object:
    view = memoryview(buf)
    try:
        if inline:
            result: AppendResult = log.append(view, leader_epoch=3, now_ms=now, origin=origin)
        else:
            result = log._append_batches(view, 3, now, origin)
    except KafkaError as exc:
        return exc.code
    return tuple(result)


def _state(log: PartitionLog) -> object:
    segs = [
        (
            s.base_offset,
            s.size,
            s.max_timestamp,
            s.offset_of_max_timestamp,
            s.bytes_since_last_index_entry,
            [s.offset_index.entry(i) for i in range(s.offset_index.entries)],
            [s.time_index.entry(i) for i in range(s.time_index.entries)],
        )
        for s in log.segments
    ]
    producers = {pid: (e.epoch, list(e.batches)) for pid, e in log.producer_state.producers.items()}
    return (log.log_end_offset, segs, log.leader_epoch_cache.entries, producers, read_all(log))


@settings(max_examples=60, deadline=None)
@given(config=st.sampled_from(CONFIGS), appends=st.lists(append, min_size=1, max_size=8))
def test_inline_path_matches_general_path(config: dict[str, str], appends: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock_a, clock_b = ManualClock(NOW), ManualClock(NOW)
        log_a = open_log(Path(tmp) / "a", clock_a, **config)
        log_b = open_log(Path(tmp) / "b", clock_b, **config)
        seq = 0
        accepted: bytearray | None = None
        try:
            for a in appends:
                pid = a["producer_id"]
                if a["retry"] and accepted is not None:
                    buf = bytearray(accepted)
                    pid = -2  # neither advance the sequence nor remember it again
                else:
                    buf = make_batch(
                        a["count"],
                        ts=NOW + a["ts_offset"],
                        value_size=a["value_size"],
                        producer_id=pid,
                        producer_epoch=0 if pid >= 0 else -1,
                        base_sequence=seq if pid >= 0 else -1,
                    )
                    for pos, value, fix_crc in a["mutations"]:
                        buf[pos] = value
                        if fix_crc:
                            rewrite_crc(buf, 0)
                now = clock_a.time_ms()
                got_a = _outcome(log_a, True, bytearray(buf), now, a["origin"])
                got_b = _outcome(log_b, False, bytearray(buf), now, a["origin"])
                assert got_a == got_b
                if pid >= 0 and isinstance(got_a, tuple):
                    seq += a["count"]
                    accepted = buf
                clock_a.advance(a["advance"])
                clock_b.advance(a["advance"])
            assert _state(log_a) == _state(log_b)
        finally:
            log_a.release()
            log_b.release()


def test_replaced_config_is_seen_by_the_inline_path(tmp_path: Path) -> None:
    """LogManager swaps `log.config` on an AlterConfigs: the cached limits must follow."""
    log = open_log(tmp_path, ManualClock(NOW))
    log.append(memoryview(make_batch(1, value_size=600)), leader_epoch=0, now_ms=NOW)
    log.config = log.config.with_overrides({"max.message.bytes": "500"})
    try:
        log.append(memoryview(make_batch(1, value_size=600)), leader_epoch=0, now_ms=NOW)
    except KafkaError as exc:
        assert exc.code.name == "MESSAGE_TOO_LARGE"
    else:
        raise AssertionError("a 600-byte batch passed max.message.bytes=500")
    log.config = log.config.with_overrides({"message.timestamp.type": "LogAppendTime"})
    result = log.append(memoryview(make_batch(1, ts=5)), leader_epoch=0, now_ms=NOW)
    assert result.log_append_time_ms == NOW
    log.release()


def test_inline_path_rolls_on_a_full_offset_index(tmp_path: Path) -> None:
    """Equal timestamps: the time index stays at one entry while the offset index fills up."""
    log = open_log(tmp_path, ManualClock(NOW), **{"segment.index.bytes": "32", "index.interval.bytes": "1"})
    for _ in range(12):
        log.append(memoryview(make_batch(1, ts=NOW)), leader_epoch=0, now_ms=NOW)
    assert [s.offset_index.entries for s in log.segments] == [4, 4, 1]
    assert [s.base_offset for s in log.segments] == [0, 5, 10]
    log.release()
