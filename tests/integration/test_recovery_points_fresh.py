"""A broker keeps its recovery points fresh (log.recovery.point.flush.ms, issue 21 goal 2).

With Kafka's defaults nothing is fsynced until a segment rolls or the broker stops, so a kill -9 after a
bulk load CRC-checks everything since. kafkad fsyncs data that waited log.recovery.point.flush.ms (2 s
by default) in the background and checkpoints the recovery point: the checkpoint must reach the log
end without any flush setting, roll or stop, and a kill -9 then must still serve every record. The
started line reports the restart's time since exec (what a supervisor waits), logs included.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import CLIENTS, make_records

pytestmark = pytest.mark.integration

RECORDS = 3000  # x ~200 B: more than the pass's 256 KiB floor


def _recovery_point(data_dir: Path, topic: str) -> int:
    try:
        lines = (data_dir / "recovery-point-offset-checkpoint").read_text().splitlines()
    except FileNotFoundError:
        return -1
    for line in lines[2:]:
        t, p, offset = line.split()
        if (t, p) == (topic, "0"):
            return int(offset)
    return -1


def test_recovery_point_reaches_the_log_end_without_flush_settings(tmp_path: Path) -> None:
    client = CLIENTS["confluent"]
    # The periodic checkpoint of all three files is out of the picture: only the background flusher writes.
    with BrokerProcess(tmp_path / "kafkad", {"log.flush.offset.checkpoint.interval.ms": "3600000"}) as b:
        client.create_topic(b.bootstrap, "fresh", 1)
        recs = [replace(r, value=b"v" * 200) for r in make_records(RECORDS, 1, int(time.time() * 1000))]
        client.produce(b.bootstrap, "fresh", recs, "none")
        deadline = time.monotonic() + 60
        while _recovery_point(b.data_dir, "fresh") < RECORDS:
            assert time.monotonic() < deadline, "the recovery point checkpoint never reached the log end"
            time.sleep(0.05)
        assert _recovery_point(b.data_dir, "fresh") == RECORDS
        b.kill9()
        b.start()
        got = client.consume(b.bootstrap, "fresh", 1, RECORDS)
        assert [g.offset for g in got] == list(range(RECORDS))
        # the started line says how long the restart took, interpreter start-up included
        assert re.search(r" started: .*; [0-9.]+ s after exec \(logs [0-9.]+ s\)", b.log_text()), b.log_text()
