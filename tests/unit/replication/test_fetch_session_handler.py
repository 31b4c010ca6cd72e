"""The follower's fetch session (KIP-227): what each request lists and how the answers move the session,
alone and against the serving side's FetchSessionCache (fetch_session.py, Kafka's FetchManager)."""

from __future__ import annotations

from typing import Any

from kafkad.protocol import ErrorCode
from kafkad.replication.fetch_request import fetch_body
from kafkad.replication.fetch_session import FetchSessionCache, finish, new_context
from kafkad.replication.fetch_session_handler import FetchSessionHandler
from kafkad.replication.fetcher import FetcherConfig

CFG = FetcherConfig(broker_id=2)


def test_a_session_lists_only_changed_partitions() -> None:
    h = FetchSessionHandler()
    wanted = [("t", 0, 1, 10, 0), ("t", 1, 1, 20, 0)]
    assert h.build(wanted) == (0, 0, wanted)
    h.handle_response(0, 42)
    assert h.build(wanted) == (42, 1, [])
    h.handle_response(0, 42)
    moved = [("t", 0, 1, 10, 0), ("t", 1, 1, 25, 0)]
    assert h.build(moved) == (42, 2, [("t", 1, 1, 25, 0)])
    h.handle_response(0, 42)
    assert h.build(moved) == (42, 3, [])


def test_another_partition_set_closes_the_session_and_opens_a_new_one() -> None:
    h = FetchSessionHandler()
    h.build([("t", 0, 1, 10, 0)])
    h.handle_response(0, 42)
    fewer: list[tuple[str, int, int, int, int]] = []
    assert h.build(fewer) == (42, 0, fewer)
    other = [("u", 0, 1, 0, 0)]
    assert h.build(other) == (42, 0, other)  # still no answer: full again
    h.handle_response(0, 43)
    assert h.build(other) == (43, 1, [])


def test_errors_and_no_session_make_the_next_request_full() -> None:
    h = FetchSessionHandler()
    wanted = [("t", 0, 1, 10, 0)]
    h.build(wanted)
    h.handle_response(0, 0)  # the leader keeps no session (cache full / off): full again
    assert h.build(wanted) == (0, 0, wanted)
    h.handle_response(0, 42)
    h.build(wanted)
    h.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    assert h.build(wanted) == (42, 0, wanted)  # close 42 and open another
    h.handle_response(0, 44)
    h.build(wanted)
    h.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert h.build(wanted) == (0, 0, wanted)
    h.handle_response(0, 45)
    h.build(wanted)
    h.failed()  # a lost connection: the leader may have moved the session's epoch already
    assert h.build(wanted) == (45, 0, wanted)


def _serve(topics: list[dict[str, Any]], log_end: dict[tuple[str, int], int]) -> list[dict[str, Any]]:
    """A leader's read pass: records for partitions fetched below its log end, HW = log end."""
    return [
        {
            "topic": t["topic"],
            "partitions": [
                {
                    "partition_index": p["partition"],
                    "error_code": 0,
                    "high_watermark": log_end[(t["topic"], p["partition"])],
                    "log_start_offset": 0,
                    "records": ["slice"] if p["fetch_offset"] < log_end[(t["topic"], p["partition"])] else [],
                }
                for p in t["partitions"]
            ],
        }
        for t in topics
    ]


def test_follower_and_leader_sessions_agree() -> None:
    """Each round: the follower lists what changed, the leader serves the whole session from its cache at
    the follower's offsets and answers only partitions with records or a new HW."""
    cache = FetchSessionCache()
    h = FetchSessionHandler()
    leo = {("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
    leader_end = {("t", 0): 5, ("t", 1): 0, ("u", 0): 0}
    listed_counts = []
    for _ in range(4):
        wanted = [(t, i, 3, leo[(t, i)], 0) for t, i in leo]
        sid, epoch, listed = h.build(wanted)
        listed_counts.append(len(listed))
        body = {**fetch_body(CFG, listed, sid, epoch), "forgotten_topics_data": []}
        ctx = new_context(cache, 11, body, True, 0)
        assert ctx.error is ErrorCode.NONE
        served = {
            (t["topic"], p["partition"]): p["fetch_offset"] for t in ctx.topics or [] for p in t["partitions"]
        }
        assert served == leo  # the leader reads every partition at the follower's own offsets
        error, answered, responses = finish(cache, ctx, _serve(ctx.topics or [], leader_end), 0)
        h.handle_response(error, answered)
        for t in responses:
            for p in t["partitions"]:
                if p["records"]:
                    leo[(t["topic"], p["partition_index"])] = p["high_watermark"]  # "appended"
        leader_end[("u", 0)] += 1  # a produce to u-0 between fetches
    # round 1 full (3); then t-0 (its first records), then u-0 (appended once per round)
    assert listed_counts == [3, 1, 1, 1]
    assert len(cache) == 1
