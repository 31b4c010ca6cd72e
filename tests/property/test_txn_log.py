"""Any interleaving of transactional writes, plain writes, commits, aborts, segment rolls, crashes and
clean restarts: the log's last stable offset and aborted-transaction list always match a plain model
(open transactions by first offset; each abort with the LSO right after it), also after recovery rebuilt
the `.txnindex` files from the log."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkad.clock import ManualClock
from kafkad.storage.log_config import LogConfig
from kafkad.storage.partition_log import PartitionLog
from kafkad.storage.records import SimpleRecord, build_batch
from kafkad.storage.txn_index import AbortedTxn

PIDS = (1, 2, 3)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("txn"), st.sampled_from(PIDS)),
        st.tuples(st.just("plain"), st.just(0)),
        st.tuples(st.just("commit"), st.sampled_from(PIDS)),
        st.tuples(st.just("abort"), st.sampled_from(PIDS)),
        st.tuples(st.just("roll"), st.just(0)),
        st.tuples(st.just("crash"), st.sampled_from([0, 1])),  # recover all, or from the flushed point
        st.tuples(st.just("restart"), st.just(0)),
    ),
    max_size=30,
)


class Model:
    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # pid -> first offset
        self.aborted: list[AbortedTxn] = []
        self.end = 0

    def lso(self) -> int:
        return min(self.ongoing.values(), default=self.end)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_lso_and_aborted_transactions_match_the_model(script: list[tuple[str, int]]) -> None:
    config = LogConfig().with_overrides({"segment.bytes": "400"})
    clock = ManualClock()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        log = PartitionLog.open(directory, config, clock, recover=False)
        seqs = dict.fromkeys(PIDS, 0)
        model = Model()
        for op, pid in script:
            if op == "txn":
                raw = build_batch(
                    [SimpleRecord(b"k", b"v" * 20, timestamp=1)],
                    producer_id=pid,
                    producer_epoch=0,
                    base_sequence=seqs[pid],
                    is_transactional=True,
                )
                seqs[pid] += 1
                offset = log.append(memoryview(bytearray(raw)), leader_epoch=0, now_ms=1).base_offset
                model.ongoing.setdefault(pid, offset)
            elif op == "plain":
                raw = build_batch([SimpleRecord(b"k", b"p" * 20, timestamp=1)])
                log.append(memoryview(bytearray(raw)), leader_epoch=0, now_ms=1)
            elif op in ("commit", "abort"):
                offset = log.append_txn_marker(pid, 0, op == "commit", 0, leader_epoch=0, now_ms=1)
                first = model.ongoing.pop(pid, None)
                if op == "abort" and first is not None:
                    model.aborted.append(
                        AbortedTxn(pid, first, offset, min(model.ongoing.values(), default=offset + 1))
                    )
            elif op == "roll":
                log.roll()
            elif op == "crash":  # no close: what reached the page cache survives
                point = log.recovery_point if pid else 0
                log.release()
                log = PartitionLog.open(directory, config, clock, recover=True, recovery_point=point)
            else:
                log.close()
                log = PartitionLog.open(directory, config, clock, recover=False)
            model.end = log.log_end_offset
            log.high_watermark = log.log_end_offset
            assert log.last_stable_offset == model.lso(), (op, pid)
            assert log.aborted_txns(0, log.log_end_offset) == model.aborted, (op, pid)
        log.close()
