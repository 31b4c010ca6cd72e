"""The checker finds every anomaly class it claims to find: each test feeds it a history containing one,
and a clean history (with an unknown send, a rebalance and a legitimate re-read) passes."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.checker import ANOMALY_CLASSES, check, window_stats
from tests.chaos.history import Fault, History, Outcome, assign, poll, send

OK = Outcome.OK


def _clean() -> History:
    """Two partitions, two writers, a group consumer with a rebalance, an assign() reader, a final read."""
    h = History()
    for i in range(10):
        p = i % 2
        h.add(send("w1", i * 0.1, i * 0.1 + 0.01, OK, p, f"v{i}", offset=i // 2))
    h.add(send("w2", 1.0, 1.5, Outcome.UNKNOWN, 0, "maybe", error="_MSG_TIMED_OUT"))  # never read: fine
    h.add(send("w2", 1.1, 1.2, Outcome.FAILED, 1, "nope", error="NOT_ENOUGH_REPLICAS"))
    h.add(poll("g1", 0.2, 0.3, [(0, 0, "v0"), (0, 1, "v2")]))
    h.add(assign("g1", 0.4))  # rebalance: the group re-reads from its committed offset 1
    h.add(poll("g1", 0.5, 0.6, [(0, 1, "v2"), (0, 2, "v4"), (1, 0, "v1")]))
    h.add(poll("r1", 1.2, 1.3, [(1, 0, "v1"), (1, 1, "v3"), (1, 2, "v5"), (1, 3, "v7"), (1, 4, "v9")]))
    h.add(poll("final", 2.0, 2.1, [(0, o, f"v{2 * o}") for o in range(5)]))
    h.add(poll("final", 2.0, 2.1, [(1, o, f"v{2 * o + 1}") for o in range(5)]))
    return h


def test_clean_history_passes(tmp_path: Path) -> None:
    h = _clean()
    r = check(h.ops)
    assert r.valid, r.explain()
    assert r.counts["acked"] == 10 and r.counts["unknown"] == 1 and r.counts["failed"] == 1
    h.save(tmp_path / "h.jsonl")
    again = History.load(tmp_path / "h.jsonl")
    assert len(again.ops) == len(h.ops)
    assert {(o.kind, o.value, o.records) for o in again.ops} == {(o.kind, o.value, o.records) for o in h.ops}
    assert check(again.ops).valid


def _only(h: History, cls: str, *also: str) -> list[dict[str, object]]:
    r = check(h.ops)
    assert r.found() == [c for c in ANOMALY_CLASSES if c in (cls, *also)], r.explain()
    return r.anomalies[cls]


def test_lost_acknowledged_write() -> None:
    h = _clean()
    h.add(send("w1", 1.8, 1.9, OK, 0, "acked-then-gone", offset=5))
    h.add(poll("final", 2.2, 2.3, [(0, 6, "later")]))  # the partition was read past it
    h.add(send("w1", 1.8, 1.9, OK, 0, "later", offset=6))
    (found,) = _only(h, "lost", "skipped")  # the final reader went from 4 to 6 over the acked 5
    assert found["value"] == "acked-then-gone" and found["offset"] == 5 and found["covered"] is True


def test_lost_write_below_a_truncated_end() -> None:
    h = _clean()
    h.add(send("w1", 1.8, 1.9, OK, 1, "beyond-the-end", offset=9))
    (found,) = _only(h, "lost")
    assert found["covered"] is False


def test_lost_after_it_was_read() -> None:
    """Read once, then gone from the final read: a log truncated below an acknowledged offset (a leader
    that came back from a power loss with a shorter log and stayed leader)."""
    h = _clean()
    h.add(send("w1", 1.8, 1.9, OK, 1, "read-then-truncated", offset=5))
    h.add(poll("r1", 1.95, 1.96, [(1, 5, "read-then-truncated")]))
    (found,) = _only(h, "lost")
    assert found["value"] == "read-then-truncated" and found["read_before"] is True


def test_duplicate() -> None:
    h = _clean()
    h.add(send("w1", 1.8, 1.9, OK, 0, "twice", offset=5))
    h.add(poll("final", 2.2, 2.3, [(0, 5, "twice"), (0, 6, "twice")]))
    (found,) = _only(h, "duplicate")
    assert found["positions"] == [(0, 5), (0, 6)]


def test_corrupt_record_served() -> None:
    """A reader got a value no writer sent (a zero-filled tail after a power loss, decoded)."""
    h = _clean()
    h.add(poll("r2", 1.4, 1.5, [(0, 5, "\ufffd\x00\x00\x00")]))
    (found,) = _only(h, "corrupt")
    assert found["partition"] == 0 and found["offset"] == 5 and found["read"] == "r2@1.500"


def test_divergent_offset_between_readers() -> None:
    h = _clean()
    for v in ("x", "y"):  # both sent, neither acknowledged (a timeout): only their positions disagree
        h.add(send("w3", 1.3, 1.4, Outcome.UNKNOWN, 0, v, error="_MSG_TIMED_OUT"))
    h.add(poll("r1", 1.4, 1.5, [(0, 5, "x")]))
    h.add(poll("r2", 1.4, 1.5, [(0, 5, "y")]))
    found = _only(h, "divergent")
    assert found[0]["partition"] == 0 and found[0]["offset"] == 5
    assert set(found[0]["values"]) == {"x", "y"}  # type: ignore[call-overload]


def test_nonmonotonic_poll() -> None:
    h = _clean()
    h.add(poll("r1", 1.4, 1.5, [(1, 2, "v5")]))  # r1 was at offset 4 of partition 1, no reassignment
    (found,) = _only(h, "nonmonotonic")
    assert (found["client"], found["previous"], found["offset"]) == ("r1", 4, 2)


def test_nonmonotonic_within_one_poll() -> None:
    h = _clean()
    h.add(poll("r9", 1.4, 1.5, [(0, 3, "v6"), (0, 3, "v6")]))
    (found,) = _only(h, "nonmonotonic")
    assert found["client"] == "r9"


def test_skipped_offsets() -> None:
    h = _clean()
    h.add(poll("r3", 1.4, 1.5, [(0, 0, "v0"), (0, 3, "v6")]))  # offsets 1 and 2 exist (acked, read)
    (found,) = _only(h, "skipped")
    assert found["skipped"] == [1, 2]


def test_gap_without_known_records_is_not_a_skip() -> None:
    h = _clean()
    h.add(poll("r3", 1.4, 1.5, [(0, 4, "v8")]))
    h.add(poll("r3", 1.6, 1.7, [(0, 40, "far")]))  # nobody ever saw 5..39 (e.g. control records)
    h.add(send("w1", 1.5, 1.6, OK, 0, "far", offset=40))
    h.add(poll("final", 2.2, 2.3, [(0, 40, "far")]))
    assert check(h.ops).valid, check(h.ops).explain()


def test_failed_send_that_was_read() -> None:
    h = _clean()
    h.add(poll("r1", 1.6, 1.7, [(1, 5, "nope")]))
    (found,) = _only(h, "failed_read")
    assert found["value"] == "nope"


def test_every_class_has_a_test() -> None:
    tested = {"lost", "duplicate", "divergent", "nonmonotonic", "skipped", "failed_read", "corrupt"}
    assert tested == set(ANOMALY_CLASSES)


def test_unavailability_windows_with_faults() -> None:
    h = History()
    t = 0.0
    off = 0
    while t < 10.0:
        if not 3.0 <= t < 5.5:  # partition 0 unwritable for 2.5 s; sends keep being attempted
            h.add(send("w", t, t + 0.01, OK, 0, f"a{off}", offset=off))
            off += 1
        else:
            h.add(send("w", t, t + 0.3, Outcome.UNKNOWN, 0, f"u{t:.1f}"))
        h.add(send("w", t, t + 0.01, OK, 1, f"b{t:.1f}", offset=int(t * 10)))
        t += 0.1
    faults = [Fault("kill9-leader", "broker 2", 2.9, 3.0)]
    r = check(h.ops, faults, threshold_s=1.0)
    (w,) = r.windows
    assert w.partition == 0 and 2.4 < w.duration < 2.7 and w.faults == ("kill9-leader",)
    stats = window_stats(r.windows)
    assert stats["count"] == 1 and stats["max_s"] == w.duration
    # an idle gap (nobody writing) is not unavailability
    idle = [send("w", 0, 0.01, OK, 0, "x", offset=0), send("w", 5, 5.01, OK, 0, "y", offset=1)]
    assert check(idle, threshold_s=1.0).windows == []
    # a partition never acknowledged at all is unavailable for the whole attempt
    never = [send("w", 0, 3, Outcome.UNKNOWN, 0, "z")]
    assert [round(x.duration) for x in check(never, threshold_s=1.0).windows] == [3]


def test_ack_without_offset_is_checked_by_value_only() -> None:
    h = _clean()
    h.add(send("w1", 1.8, 1.9, OK, 0, "no-offset", offset=-1))  # librdkafka can ack without an offset
    h.add(poll("final", 2.2, 2.3, [(0, 5, "no-offset")]))
    assert check(h.ops).valid, check(h.ops).explain()
    h.add(send("w1", 1.8, 1.9, OK, 1, "no-offset-lost", offset=-1))
    assert check(h.ops).found() == ["lost"]
