"""The transactional checker finds every anomaly class it claims to find: each test feeds it a history that
contains one, and a clean history (an aborted transaction skipped by every reader, a commit that timed out
but landed, a producer fenced by its restart, a rebalance, a dead producer aborted in time) passes."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.history import Outcome
from tests.chaos.txn_checker import TXN_ANOMALY_CLASSES, check_txn
from tests.chaos.txn_history import (
    TxnHistory,
    died,
    lso_sample,
    out_value,
    split_value,
    tassign,
    tinput,
    tpoll,
    txn,
)

OK, ABORTED, UNKNOWN = Outcome.OK, Outcome.FAILED, Outcome.UNKNOWN
TIMEOUT_S = 10.0


def v(t: str, src: str) -> str:
    return out_value(t, src)


def _clean() -> TxnHistory:
    """Input i0..i5 on partition 0 of the input topic; output partitions 0 and 1 (control records take the
    offsets between the data: 1, 3, 5 ... on partition 0)."""
    h = TxnHistory()
    for i in range(6):
        h.add(tinput("src", 0.01 * i, 0, i, f"i{i}"))
    h.add(txn("p1", 0.1, 0.2, OK, "p1-0", [(0, 0, v("p1-0", "i0")), (1, 0, v("p1-0", "i1"))]))
    h.add(txn("p1", 0.2, 0.3, ABORTED, "p1-1", [(0, 2, v("p1-1", "i2"))]))
    h.add(txn("p1", 0.3, 0.4, OK, "p1-2", [(0, 4, v("p1-2", "i2")), (1, 2, v("p1-2", "i3"))]))
    # the commit timed out on the client, but the coordinator had written the markers: readers see it
    h.add(txn("p1", 0.4, 5.4, UNKNOWN, "p1-3", [(1, 4, v("p1-3", "i4"))], error="_TIMED_OUT"))
    # p2 died mid-transaction (never read, aborted when it timed out); p2b took its input over
    h.add(txn("p2", 0.5, 0.6, UNKNOWN, "p2-0", [(0, -1, v("p2-0", "i5"))], error="died"))
    h.add(died("p2", 0.6, [0], "p2-0"))
    h.add(txn("p2b", 1.0, 1.1, OK, "p2-1", [(0, 8, v("p2-1", "i5")), (0, 9, v("p2-1", "c0"))]))
    h.add(tassign("r1", 0.0))
    h.add(tpoll("r1", 0.3, 0.31, [(0, 0, v("p1-0", "i0"))]))
    h.add(tpoll("r1", 0.5, 0.51, [(0, 4, v("p1-2", "i2")), (1, 0, v("p1-0", "i1"))]))
    h.add(tpoll("g1", 0.5, 0.51, [(1, 0, v("p1-0", "i1")), (1, 2, v("p1-2", "i3"))]))
    h.add(tassign("g1", 0.6))  # rebalance: re-reads partition 1 from its committed offset 2
    h.add(tpoll("g1", 6.0, 6.01, [(1, 2, v("p1-2", "i3")), (1, 4, v("p1-3", "i4"))]))
    h.add(tassign("final", 11.5))
    h.add(tpoll("final", 11.5, 11.6, [(0, 0, v("p1-0", "i0")), (0, 4, v("p1-2", "i2"))]))
    h.add(tpoll("final", 11.6, 11.7, [(0, 8, v("p2-1", "i5")), (0, 9, v("p2-1", "c0"))]))
    h.add(
        tpoll(
            "final",
            11.6,
            11.7,
            [(1, o, val) for o, val in ((0, v("p1-0", "i1")), (2, v("p1-2", "i3")), (4, v("p1-3", "i4")))],
        )
    )
    # partition 0: p2's open transaction holds the LSO at 6 from its death until its timeout abort
    for t, lso, hw in ((0.05, 0, 1), (0.35, 2, 5), (0.7, 6, 8), (5.0, 6, 8), (9.0, 6, 8), (10.4, 11, 11)):
        h.add(lso_sample(t, 0, lso, hw))
    for t, lso, hw in ((0.05, 0, 0), (0.45, 3, 4), (5.5, 5, 5), (11.0, 5, 5)):
        h.add(lso_sample(t, 1, lso, hw))
    return h


def _only(h: TxnHistory, cls: str, **kw: object) -> list[dict[str, object]]:
    r = check_txn(h.ops, txn_timeout_s=TIMEOUT_S, **kw)  # type: ignore[arg-type]
    assert r.found() == [cls], r.explain()
    return r.anomalies[cls]


def test_clean_history_passes(tmp_path: Path) -> None:
    h = _clean()
    r = check_txn(h.ops, txn_timeout_s=TIMEOUT_S, expect_all_inputs=True)
    assert r.valid, r.explain()
    assert (r.counts["committed"], r.counts["aborted"], r.counts["undecided"]) == (3, 1, 2)
    assert r.counts["died"] == 1 and r.counts["inputs"] == 6
    assert max(r.lso_waits) < TIMEOUT_S
    h.save(tmp_path / "h.jsonl")
    again = TxnHistory.load(tmp_path / "h.jsonl")
    assert again.ops == h.ops
    assert check_txn(again.ops, txn_timeout_s=TIMEOUT_S).valid


def test_value_names_its_transaction_and_source() -> None:
    assert split_value(out_value("w3-17", "i-9|x")) == ("w3-17", "i-9|x")
    assert split_value("plain") == ("", "plain")


def test_aborted_record_seen_by_read_committed() -> None:
    h = _clean()
    h.add(tpoll("r2", 0.4, 0.41, [(0, 0, v("p1-0", "i0")), (0, 2, v("p1-1", "i2"))]))
    (found,) = _only(h, "aborted_read")
    assert found["txn"] == "p1-1" and found["readers"] == ["r2"]


def test_committed_transaction_missing_from_the_final_read() -> None:
    h = _clean()
    h.ops = [
        o for o in h.ops if not (o.kind == "poll" and o.client == "final" and o.records[0].partition == 1)
    ]
    h.add(tpoll("final", 11.6, 11.7, [(1, 2, v("p1-2", "i3")), (1, 4, v("p1-3", "i4"))]))  # no p1-0 record
    (found,) = _only(h, "partial")
    assert found["txn"] == "p1-0" and found["missing_from_final"] == [v("p1-0", "i1")]


def test_committed_transaction_seen_partly_by_a_reader() -> None:
    """r3's run over partition 0 went from offset 0 to 8 without p1-2's record at 4 (its other record, on
    partition 1, was visible): a reader saw the transaction partly."""
    h = _clean()
    h.add(tpoll("r3", 1.2, 1.3, [(0, 0, v("p1-0", "i0")), (0, 8, v("p2-1", "i5"))]))
    h.add(tpoll("r3", 1.2, 1.3, [(1, 2, v("p1-2", "i3"))]))
    (found,) = _only(h, "partial")
    assert (found["txn"], found["reader"], found["passed_over"]) == ("p1-2", "r3", 4)


def test_undecided_transaction_seen_partly() -> None:
    """A commit with an unknown outcome is committed once anyone read it: then all of it must be there."""
    h = _clean()
    h.add(txn("p1", 5.5, 6.5, UNKNOWN, "p1-4", [(0, 11, v("p1-4", "c1")), (1, 6, v("p1-4", "c2"))]))
    h.add(tpoll("final", 11.8, 11.9, [(1, 6, v("p1-4", "c2"))]))
    (found,) = _only(h, "partial")
    assert found["txn"] == "p1-4" and found["missing_from_final"] == [v("p1-4", "c1")]


def test_duplicate_output_across_a_restart() -> None:
    """p1 restarted before its offsets commit landed and its successor consumed i0 again, committing it
    a second time: exactly-once broken though every record is where its producer put it."""
    h = _clean()
    h.add(txn("p1b", 6.0, 6.1, OK, "p1b-0", [(1, 6, v("p1b-0", "i0"))]))
    h.add(tpoll("final", 11.8, 11.9, [(1, 6, v("p1b-0", "i0"))]))
    (found,) = _only(h, "duplicate")
    assert found == {"input": "i0", "committed_txns": ["p1-0", "p1b-0"]}


def test_duplicate_output_record() -> None:
    h = _clean()
    h.add(tpoll("r9", 11.0, 11.1, [(0, 9, v("p2-1", "c0")), (0, 12, v("p2-1", "c0"))]))
    (found,) = _only(h, "duplicate")
    assert found["positions"] == [(0, 9), (0, 12)]


def test_aborted_duplicate_is_not_a_duplicate() -> None:
    h = _clean()  # i2 went into aborted p1-1 and committed p1-2: once
    r = check_txn(h.ops, txn_timeout_s=TIMEOUT_S)
    assert not r.anomalies["duplicate"]


def test_lso_stuck_after_its_producer_died() -> None:
    h = _clean()
    h.add(txn("p3", 12.0, 12.1, UNKNOWN, "p3-0", [(1, 6, v("p3-0", "c9"))], error="died"))
    h.add(died("p3", 12.2, [1], "p3-0"))
    for t in (12.3, 15.0, 20.0, 25.0, 30.0):  # never aborted: the LSO stays at 6 while the hw grows
        h.add(lso_sample(t, 1, 6, 7 + int(t)))
    (found,) = _only(h, "lso_stuck")
    assert found["partition"] == 1 and found["lso"] == 6 and found["cleared"] is False
    assert found["died"] == ["p3"] and float(str(found["stuck_s"])) > TIMEOUT_S


def test_lso_cleared_late_is_stuck() -> None:
    h = _clean()
    h.add(died("p4", 12.0, [0]))
    for t, lso, hw in ((12.1, 11, 13), (20.0, 11, 15), (30.0, 16, 16)):  # cleared 17.9 s after 12.1
        h.add(lso_sample(t, 0, lso, hw))
    (found,) = _only(h, "lso_stuck")
    assert found["cleared"] is True and found["died"] == ["p4"] and 17.8 < float(str(found["stuck_s"])) < 18.0


def test_lso_without_a_later_sample_is_not_judged() -> None:
    h = _clean()
    h.add(lso_sample(12.0, 1, 5, 9))  # open at the end of the history, too recent to judge
    assert check_txn(h.ops, txn_timeout_s=TIMEOUT_S).valid


def test_unprocessed_input() -> None:
    h = _clean()
    h.add(tinput("src", 3.0, 0, 6, "i6"))
    assert check_txn(h.ops, txn_timeout_s=TIMEOUT_S).valid  # not judged unless the input was drained
    (found,) = _only(h, "unprocessed", expect_all_inputs=True)
    assert found == {"input": "i6"}


def test_every_class_has_a_test() -> None:
    tested = {"aborted_read", "partial", "duplicate", "lso_stuck", "unprocessed"}
    assert tested == set(TXN_ANOMALY_CLASSES)
