"""Found by the chaos suite (tests/chaos, damaged-segment nemesis): a segment recovered at a clean start
rebuilds its index with Kafka's rule over every batch, which can hold more entries than the trimmed index
file a clean shutdown left (after restarts the live appends index more sparsely: the byte count since the
last entry starts again at 0 on each open). The rebuild raised IndexFullError and the partition went
offline. Recovery must give the rebuilt indexes room, whatever size the files had.
"""

from __future__ import annotations

from pathlib import Path

from kafkad.clock import ManualClock
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.test_clean_start_damage import active_log_path, reopen_clean
from tests.unit.storage.test_partition_log_helpers import make_batch, open_log, read_all


def test_recovery_after_restarts_rebuilds_a_denser_index(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, **{"index.interval.bytes": "300"})
    appended = 0
    for _round in range(3):  # append, clean close (index trimmed), clean reopen: three times
        for i in range(40):
            batch = make_batch(2, ts=clock.time_ms(), tag=appended + i, value_size=50)
            log.append(memoryview(batch), leader_epoch=1, now_ms=clock.time_ms())
            clock.advance(5)
        appended += 40
        log.close()
        log = reopen_clean(log)
    end = log.log_end_offset
    before = read_all(log)
    log.close()
    with open(active_log_path(log), "ab") as f:
        f.write(b"\x07" * 37)  # the damaged tail makes the clean start recover the segment
    again: PartitionLog = reopen_clean(log)
    try:
        assert again.log_end_offset == end
        assert read_all(again) == before
        batch = make_batch(2, ts=clock.time_ms(), tag=999, value_size=50)
        again.append(memoryview(batch), leader_epoch=1, now_ms=clock.time_ms())
        assert again.log_end_offset == end + 2
    finally:
        again.close()
