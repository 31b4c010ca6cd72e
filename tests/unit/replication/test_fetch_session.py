"""Fetch sessions (KIP-227) as Kafka's FetchManager / FetchSessionCache answer them: session creation,
epochs, the session errors, incremental requests (added, changed, forgotten partitions), incremental
responses (only changed partitions; served ones move to the end) and the cache's eviction rules."""

from __future__ import annotations

import itertools
from typing import Any

from kafkad.protocol import ErrorCode
from kafkad.replication.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSessionCache,
    finish,
    new_context,
    next_epoch,
)

V = 11  # topics by name
NOW = 1_000_000


def _p(index: int, offset: int = 0, max_bytes: int = 1024) -> dict[str, Any]:
    return {
        "partition": index,
        "current_leader_epoch": 0,
        "fetch_offset": offset,
        "log_start_offset": 0,
        "partition_max_bytes": max_bytes,
    }


def _body(
    session_id: int,
    epoch: int,
    topics: dict[str, list[dict[str, Any]]],
    forget: dict[str, list[int]] | None = None,
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in (forget or {}).items()],
    }


def _serve(
    topics: list[dict[str, Any]], hw: int = 10, records: set[tuple[str, int]] | None = None
) -> list[dict[str, Any]]:
    """What the Fetch handler's read pass answers for `topics`: every partition, records for `records`."""
    return [
        {
            "topic": t["topic"],
            "partitions": [
                {
                    "partition_index": p["partition"],
                    "error_code": 0,
                    "high_watermark": hw,
                    "log_start_offset": 0,
                    "records": ["slice"] if (t["topic"], p["partition"]) in (records or set()) else [],
                }
                for p in t["partitions"]
            ],
        }
        for t in topics
    ]


def _answered(responses: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(t["topic"], p["partition_index"]) for t in responses for p in t["partitions"]]


def _open(cache: FetchSessionCache, topics: dict[str, list[dict[str, Any]]], follower: bool = False) -> int:
    ctx = new_context(cache, V, _body(0, INITIAL_EPOCH, topics), follower, NOW)
    assert ctx.error is ErrorCode.NONE and ctx.session is None and ctx.create
    error, sid, _ = finish(cache, ctx, _serve(ctx.topics or []), NOW)
    assert error is ErrorCode.NONE
    return sid


def _counter() -> Any:
    ids = itertools.count(1)
    return lambda lo, hi: next(ids)


def test_next_epoch_wraps_to_one_and_final_stays_final() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(-1) == FINAL_EPOCH


def test_sessionless_requests_make_no_session() -> None:
    cache = FetchSessionCache()
    for version, body in ((6, _body(0, 0, {"t": [_p(0)]})), (V, _body(0, FINAL_EPOCH, {"t": [_p(0)]}))):
        ctx = new_context(cache, version, body, False, NOW)
        assert ctx.error is ErrorCode.NONE and not ctx.create
        served = _serve(ctx.topics or [])
        assert finish(cache, ctx, served, NOW) == (ErrorCode.NONE, INVALID_SESSION_ID, served)
    assert len(cache) == 0


def test_initial_epoch_creates_a_session_at_epoch_one() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0), _p(1)]})
    assert sid != INVALID_SESSION_ID
    session = cache.get(sid)
    assert session is not None and session.epoch == 1 and len(session.partitions) == 2
    assert cache.num_partitions == 2


def test_incremental_serves_every_session_partition_and_answers_only_changed_ones() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0, 5), _p(1, 7)], "u": [_p(0, 9)]})
    # epoch 1 lists only t-1 (its offset moved): the read covers all three partitions of the session
    ctx = new_context(cache, V, _body(sid, 1, {"t": [_p(1, 8)]}), False, NOW)
    assert ctx.error is ErrorCode.NONE and ctx.session is not None
    offsets = {
        (t["topic"], p["partition"]): p["fetch_offset"] for t in ctx.topics or [] for p in t["partitions"]
    }
    assert offsets == {("t", 0): 5, ("t", 1): 8, ("u", 0): 9}
    # nothing changed (same HW, no records): an empty incremental response
    error, got_sid, responses = finish(cache, ctx, _serve(ctx.topics or []), NOW)
    assert (error, got_sid, responses) == (ErrorCode.NONE, sid, [])
    # epoch 2: u-0 has records, every HW moved for t-0 only
    ctx = new_context(cache, V, _body(sid, 2, {}), False, NOW)
    served = _serve(ctx.topics or [], records={("u", 0)})
    served[0]["partitions"][0]["high_watermark"] = 11
    _, _, responses = finish(cache, ctx, served, NOW)
    assert _answered(responses) == [("t", 0), ("u", 0)]


def test_partitions_that_returned_records_move_to_the_end() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0), _p(1), _p(2)]})
    ctx = new_context(cache, V, _body(sid, 1, {}), False, NOW)
    finish(cache, ctx, _serve(ctx.topics or [], records={("t", 0)}), NOW)
    ctx = new_context(cache, V, _body(sid, 2, {}), False, NOW)
    order = [p["partition"] for t in ctx.topics or [] for p in t["partitions"]]
    assert order == [1, 2, 0]


def test_wrong_epoch_and_unknown_id_are_session_errors() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0)]})
    ctx = new_context(cache, V, _body(sid, 5, {}), False, NOW)
    assert ctx.error is ErrorCode.INVALID_FETCH_SESSION_EPOCH and ctx.topics is None
    ctx = new_context(cache, V, _body(sid + 1, 1, {}), False, NOW)
    assert ctx.error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # the session survives an error: its expected epoch is still 1
    assert new_context(cache, V, _body(sid, 1, {}), False, NOW).error is ErrorCode.NONE


def test_switching_between_topic_names_and_ids_is_a_session_error() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0)]})
    body = _body(sid, 1, {})
    body["topics"] = []
    assert new_context(cache, 13, body, False, NOW).error is ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_a_duplicate_request_of_the_same_epoch_answers_invalid_epoch() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0)]})
    first = new_context(cache, V, _body(sid, 1, {}), False, NOW)
    second = new_context(cache, V, _body(sid, 2, {}), False, NOW)  # came in while `first` was parked
    error, got_sid, responses = finish(cache, first, _serve(first.topics or []), NOW)
    assert (error, got_sid, responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid, [])
    assert finish(cache, second, _serve(second.topics or []), NOW)[0] is ErrorCode.NONE


def test_added_changed_and_forgotten_partitions() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0, 1), _p(1, 1)]})
    ctx = new_context(cache, V, _body(sid, 1, {"t": [_p(1, 4, 99)], "u": [_p(3, 2)]}, {"t": [0]}), False, NOW)
    reqs = {(t["topic"], p["partition"]): p for t in ctx.topics or [] for p in t["partitions"]}
    assert set(reqs) == {("t", 1), ("u", 3)}
    assert (reqs[("t", 1)]["fetch_offset"], reqs[("t", 1)]["partition_max_bytes"]) == (4, 99)
    # the new partition is answered (its HW is new to the session), the changed one is not (same HW)
    _, _, responses = finish(cache, ctx, _serve(ctx.topics or []), NOW)
    assert _answered(responses) == [("u", 3)]
    assert cache.num_partitions == 2


def test_a_request_forgetting_every_partition_closes_the_session_and_is_sessionless() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0)]})
    ctx = new_context(cache, V, _body(sid, 1, {}, {"t": [0]}), False, NOW)
    assert ctx.error is ErrorCode.NONE and ctx.session is None and not ctx.create
    assert cache.get(sid) is None and cache.num_partitions == 0
    assert finish(cache, ctx, [], NOW)[1] == INVALID_SESSION_ID


def test_full_requests_close_the_session_they_name() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0)]})
    ctx = new_context(cache, V, _body(sid, FINAL_EPOCH, {"t": [_p(0)]}), False, NOW)
    assert cache.get(sid) is None and not ctx.create
    sid = _open(cache, {"t": [_p(0)]})
    ctx = new_context(cache, V, _body(sid, INITIAL_EPOCH, {"t": [_p(0)]}), False, NOW)
    assert cache.get(sid) is None and ctx.create
    _, new_sid, _ = finish(cache, ctx, _serve(ctx.topics or []), NOW)
    assert new_sid not in (INVALID_SESSION_ID, sid) and len(cache) == 1


def test_errors_are_always_answered_and_re_sent_once_gone() -> None:
    cache = FetchSessionCache()
    sid = _open(cache, {"t": [_p(0)]})
    ctx = new_context(cache, V, _body(sid, 1, {}), False, NOW)
    served = _serve(ctx.topics or [])
    served[0]["partitions"][0]["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert _answered(finish(cache, ctx, served, NOW)[2]) == [("t", 0)]
    # the error is gone, HW as before: still answered (the cached HW was reset to -1)
    ctx = new_context(cache, V, _body(sid, 2, {}), False, NOW)
    assert _answered(finish(cache, ctx, _serve(ctx.topics or []), NOW)[2]) == [("t", 0)]
    ctx = new_context(cache, V, _body(sid, 3, {}), False, NOW)
    assert finish(cache, ctx, _serve(ctx.topics or []), NOW)[2] == []


def test_a_full_cache_answers_session_id_zero() -> None:
    cache = FetchSessionCache(max_entries=1, rand=_counter())
    assert _open(cache, {"t": [_p(0)]}) == 1
    assert _open(cache, {"t": [_p(0)]}) == INVALID_SESSION_ID  # a fresh session of the same worth stays
    assert FetchSessionCache(max_entries=0).maybe_create(NOW, True, 1, False, dict) == INVALID_SESSION_ID


def test_eviction_prefers_stale_then_less_valuable_sessions() -> None:
    cache = FetchSessionCache(max_entries=2, eviction_ms=1000, rand=_counter())
    consumer = cache.maybe_create(NOW, False, 5, False, dict)
    follower = cache.maybe_create(NOW, True, 1, False, dict)
    # a consumer cannot evict a young session; a follower evicts the young consumer session (privileged)
    assert cache.maybe_create(NOW + 10, False, 100, False, dict) == INVALID_SESSION_ID
    newer = cache.maybe_create(NOW + 10, True, 1, False, dict)
    assert newer != INVALID_SESSION_ID and cache.get(consumer) is None and cache.get(follower) is not None
    assert cache.evictions == 1
    # a session unused for longer than eviction_ms goes first, whoever asks
    later = NOW + 5000
    cache.touch(cache.sessions[newer], later)
    got = cache.maybe_create(later, False, 1, False, dict)
    assert got != INVALID_SESSION_ID and cache.get(follower) is None and cache.get(newer) is not None


def test_old_sessions_become_evictable_by_all_at_their_next_use() -> None:
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, rand=_counter())
    sid = cache.maybe_create(NOW, True, 3, False, dict)
    cache.touch(cache.sessions[sid], NOW + 900)
    assert cache.maybe_create(NOW + 950, False, 10, False, dict) == INVALID_SESSION_ID
    cache.touch(cache.sessions[sid], NOW + 1500)  # older than eviction_ms now: evictable by anyone
    assert cache.maybe_create(NOW + 1600, False, 10, False, dict) == INVALID_SESSION_ID  # worth less
    assert cache.maybe_create(NOW + 1600, True, 10, False, dict) != INVALID_SESSION_ID
    assert cache.get(sid) is None


def test_default_session_ids_are_in_kafkas_range() -> None:
    """The default draw (os.urandom, not the random module) stays in [lo, hi], and sessions differ."""
    from kafkad.replication.fetch_session import _randint

    assert all(1 <= _randint(1, 0x7FFFFFFF - 1) <= 0x7FFFFFFE for _ in range(1000))
    assert {_randint(5, 2**31 - 1) >= 5 for _ in range(100)} == {True}
    assert len({_randint(1, 0x7FFFFFFE) for _ in range(100)}) > 90
