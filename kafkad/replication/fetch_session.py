"""Fetch sessions on the serving side (KIP-227; Kafka's FetchSession.scala: FetchManager, FetchSessionCache).

A fetcher (a follower, librdkafka, the Java consumer) that sends session_id 0 and epoch 0 (INITIAL) asks
for a session: the full request is served, and its partitions, with what was sent for each, are cached under
a new session id the response carries. Its next requests carry that id and the next epoch and list only
the partitions whose request fields changed (added or updated), plus `forgotten_topics_data` (removed);
the broker reads every partition of the session and answers only those with records, an error, a new high
watermark or log start offset (or a preferred read replica / diverging epoch). A partition that returned
records moves to the end of the session's order, so a response cut by max_bytes starves none.

Requests, as FetchManager.newContext sorts them:
- epoch -1 (FINAL): sessionless; a session id given is closed. Fetch v0-6 (no session fields) likewise.
- epoch 0 (INITIAL): a given session is closed, and a new one made if the cache has room (else the
  response carries session id 0 and the client goes on with full requests).
- any other epoch: the session's incremental request. An unknown id answers FETCH_SESSION_ID_NOT_FOUND, an
  epoch other than the session's INVALID_FETCH_SESSION_EPOCH, a switch between topic names and topic ids
  (v13) FETCH_SESSION_TOPIC_ID_ERROR: each with session id 0 and no partitions. A request that leaves the
  session empty removes it and is served sessionless.

The cache (`max.incremental.fetch.session.cache.slots`, default 1000) evicts, when full, a session unused
for 120 s, else the least valuable evictable one if the new session is worth more: (privileged, size, id),
privileged meaning a follower's; a session becomes evictable by all at its first use after 120 s of age, by
privileged newcomers at once unless it is privileged itself. One shard (Kafka 3.9 shards the cache by
num.io.threads for lock contention, which an event loop does not have). Runs on the event loop.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from kafkad.protocol import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SESSIONS_FROM_VERSION = 7  # Fetch v7 added session_id, session_epoch, forgotten_topics_data
EVICTION_MS = 120_000  # Kafka's FetchManager: the cache's evictionMs
DEFAULT_SLOTS = 1000  # max.incremental.fetch.session.cache.slots

# A partition in a session: (topic name, or topic id from v13, partition index)
Key = tuple[Any, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH  # a sessionless request stays sessionless
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


class CachedPartition:
    """One partition of a session: the request fields last sent for it (the request's own partition
    dict, which the read pass takes as it is) and the response fields last answered (Kafka's
    CachedPartition)."""

    __slots__ = ("high_watermark", "local_log_start", "req")

    def __init__(self, p: Mapping[str, Any]) -> None:
        # partition, current_leader_epoch, fetch_offset, log_start_offset, partition_max_bytes, ...
        self.req: dict[str, Any] = p if isinstance(p, dict) else dict(p)
        self.high_watermark = -1
        self.local_log_start = -1

    @property
    def fetch_offset(self) -> int:
        return int(self.req["fetch_offset"])

    @property
    def max_bytes(self) -> int:
        return int(self.req["partition_max_bytes"])

    def must_respond(self, out: Mapping[str, Any], update: bool) -> bool:
        """Kafka's maybeUpdateResponseData: whether the response partition `out` goes into an incremental
        response; with `update`, remember its high watermark and log start offset."""
        respond = bool(out["records"])
        hw = out["high_watermark"]
        if hw != self.high_watermark:
            respond = True
            if update:
                self.high_watermark = hw
        start = out["log_start_offset"]
        if start != self.local_log_start:
            respond = True
            if update:
                self.local_log_start = start
        if out.get("preferred_read_replica", -1) >= 0:
            respond = True
        if out["error_code"]:
            if update:  # re-sent once the error is gone
                self.high_watermark = -1
            respond = True
        diverging = out.get("diverging_epoch")
        if diverging is not None and (diverging["epoch"] >= 0 or diverging["end_offset"] >= 0):
            respond = True
        return respond


class FetchSession:
    """Kafka's FetchSession: its partitions in fetch order (a dict keeps insertion order; re-inserting
    moves a partition to the end)."""

    __slots__ = (
        "cached_size",
        "creation_ms",
        "epoch",
        "evictable_by_all",
        "evictable_by_privileged",
        "id",
        "last_used_ms",
        "partitions",
        "privileged",
        "topics",
        "uses_topic_ids",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[Key, CachedPartition],
        uses_topic_ids: bool,
        now_ms: int,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1  # the size the cache last counted (-1: not in the cache)
        self.evictable_by_all = False
        self.evictable_by_privileged = False
        # The session's partitions as a request's topics array (None: to rebuild), kept while neither
        # its members nor their order change: an incremental request updates the cached request dicts
        # in place, so a follower's fetch of one changed partition out of many rebuilds nothing.
        self.topics: list[dict[str, Any]] | None = None

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, privileged={self.privileged}, partitions={len(self.partitions)}, "
            f"epoch={self.epoch})"
        )

    def update(
        self, requested: Iterable[tuple[Key, Mapping[str, Any]]], forgotten: Iterable[Key]
    ) -> tuple[int, int, int]:
        """Apply an incremental request: (added, updated, removed) counts."""
        added = updated = removed = 0
        parts = self.partitions
        for key, p in requested:
            cached = parts.get(key)
            if cached is None:
                parts[key] = CachedPartition(p)
                added += 1
            else:
                cached.req.update(p)  # in place: the cached topics array holds it
                updated += 1
        for key in forgotten:
            if parts.pop(key, None) is not None:
                removed += 1
        if added or removed:
            self.topics = None
        return added, updated, removed


def _randint(lo: int, hi: int) -> int:
    """random.randint(lo, hi) for session ids, 0 <= lo <= hi < 2**31 spanning most of that range
    (`_new_id` draws from [1, 2**31 - 2]), uniform by rejection, from os.urandom: the random module costs
    an idle broker ~0.3 MB of RSS for this one draw per new session."""
    while True:
        n = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
        if lo <= n <= hi:
            return n


class FetchSessionCache:
    """Kafka's FetchSessionCacheShard (one shard): sessions by id, with its eviction rules."""

    def __init__(
        self,
        max_entries: int = DEFAULT_SLOTS,
        eviction_ms: int = EVICTION_MS,
        rand: Callable[[int, int], int] = _randint,
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._rand = rand
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def _new_id(self) -> int:
        while True:
            sid = self._rand(1, 0x7FFFFFFF - 1)
            if sid not in self.sessions:
                return sid

    def maybe_create(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        partitions: Callable[[], dict[Key, CachedPartition]],
    ) -> int:
        """A new session's id, or INVALID_SESSION_ID if the cache is full of sessions worth more."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), privileged, partitions(), uses_topic_ids, now_ms)
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - oldest.last_used_ms > self.eviction_ms:  # stale: anyone may take its place
            self.remove(oldest)
            self.evictions += 1
            return True
        candidates = [
            s
            for s in self.sessions.values()
            if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        least = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        # Kafka compares EvictableKey(privileged, size, 0) with the candidate's: not less valuable
        if (privileged, size, 0) < (least.privileged, least.cached_size, least.id):
            return False
        self.remove(least)
        self.evictions += 1
        return True

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        sid = session if isinstance(session, int) else session.id
        found = self.sessions.pop(sid, None)
        if found is not None:
            self.num_partitions -= max(found.cached_size, 0)
            found.cached_size = -1
            found.evictable_by_all = found.evictable_by_privileged = False
        return found

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Kafka's touch: last used now, its size counted again, its evictability decided by its age."""
        session.last_used_ms = now_ms
        if session.cached_size != -1:
            self.num_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old
        self.num_partitions += session.cached_size


class FetchContext(NamedTuple):
    """What one Fetch request is, session-wise (Kafka's FetchContext kinds).

    `error`: a session error to answer with no partitions (session id 0). Otherwise `topics` is the
    request's topics array to serve (for an incremental request, every partition of the session in its
    order), and `finish` turns the responses into (session id, responses to send)."""

    error: ErrorCode
    topics: list[dict[str, Any]] | None
    session: FetchSession | None = None  # incremental: the session; full: None
    epoch: int = FINAL_EPOCH  # the request's epoch (incremental: checked again when answering)
    create: bool = False  # full request at INITIAL_EPOCH: make a session from the response
    privileged: bool = False
    uses_topic_ids: bool = False


def _topic_key(t: Mapping[str, Any], by_id: bool) -> Any:
    return t["topic_id"] if by_id else t["topic"]


def new_context(
    cache: FetchSessionCache, version: int, body: Mapping[str, Any], follower: bool, now_ms: int
) -> FetchContext:
    """Kafka's FetchManager.newContext for a decoded Fetch request body."""
    topics = body.get("topics") or []
    if version < SESSIONS_FROM_VERSION:
        return FetchContext(ErrorCode.NONE, topics)
    session_id = body.get("session_id", INVALID_SESSION_ID)
    epoch = body.get("session_epoch", FINAL_EPOCH)
    by_id = version >= 13
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full request: any session named is closed
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        return FetchContext(ErrorCode.NONE, topics, None, epoch, epoch == INITIAL_EPOCH, follower, by_id)
    session = cache.get(session_id)
    if session is None:
        return FetchContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, None)
    if session.epoch != epoch:
        return FetchContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH, None)
    if session.uses_topic_ids != by_id:
        return FetchContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, None)
    name = "topic_id" if by_id else "topic"
    forgotten = body.get("forgotten_topics_data")
    if forgotten or not _update_known(session.partitions, topics, name):
        session.update(
            (((t[name], p["partition"]), p) for t in topics for p in t["partitions"]),
            ((t[name], index) for t in forgotten for index in t["partitions"]) if forgotten else (),
        )
        if not session.partitions:
            cache.remove(session)
            return FetchContext(ErrorCode.NONE, topics)
    cache.touch(session, now_ms)
    session.epoch = next_epoch(session.epoch)
    served = session.topics
    if served is None:
        served = session.topics = _session_topics(session, by_id)
    return FetchContext(ErrorCode.NONE, served, session, epoch)


def _update_known(parts: dict[Key, CachedPartition], topics: list[dict[str, Any]], name: str) -> bool:
    """The steady incremental request (a follower's: the partitions it lists are in the session, none
    forgotten): update their cached request dicts in place; False at the first partition the session
    does not hold (FetchSession.update then applies the whole request, adding it)."""
    for t in topics:
        topic = t[name]
        for p in t["partitions"]:
            cached = parts.get((topic, p["partition"]))
            if cached is None:
                return False
            cached.req.update(p)
    return True


def _session_topics(session: FetchSession, by_id: bool) -> list[dict[str, Any]]:
    """Every partition of the session as a request's topics array, in session order (a topic whose
    partitions are not consecutive appears more than once, as Kafka's own iteration would read them)."""
    out: list[dict[str, Any]] = []
    last: Any = None
    current: list[Mapping[str, Any]] = []
    for (topic, _), cached in session.partitions.items():
        if topic != last or not out:
            current = []
            out.append(
                {"topic_id": topic, "partitions": current}
                if by_id
                else {"topic": topic, "partitions": current}
            )
            last = topic
        current.append(cached.req)
    return out


def finish(
    cache: FetchSessionCache, ctx: FetchContext, responses: list[dict[str, Any]], now_ms: int
) -> tuple[ErrorCode, int, list[dict[str, Any]]]:
    """(error, session id, responses to send) for the served `responses` (updateAndGenerateResponseData)."""
    if ctx.session is not None:
        return _incremental(ctx, ctx.session, responses)
    if not ctx.create:
        return ErrorCode.NONE, INVALID_SESSION_ID, responses
    by_id = ctx.uses_topic_ids
    topics = ctx.topics or []

    def partitions() -> dict[Key, CachedPartition]:
        cached: dict[Key, CachedPartition] = {}
        for t_req, t_resp in zip(topics, responses, strict=True):
            key = _topic_key(t_req, by_id)
            for p_req, p_resp in zip(t_req["partitions"], t_resp["partitions"], strict=True):
                c = CachedPartition(p_req)
                c.high_watermark = p_resp["high_watermark"]
                c.local_log_start = p_resp["log_start_offset"]
                cached[(key, p_req["partition"])] = c
        return cached

    size = sum(len(t["partitions"]) for t in responses)
    session_id = cache.maybe_create(now_ms, ctx.privileged, size, by_id, partitions)
    return ErrorCode.NONE, session_id, responses


def _incremental(
    ctx: FetchContext, session: FetchSession, responses: list[dict[str, Any]]
) -> tuple[ErrorCode, int, list[dict[str, Any]]]:
    if session.epoch != next_epoch(ctx.epoch):  # another request of this session came in meanwhile
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
    by_id = session.uses_topic_ids
    parts = session.partitions
    topics_req = ctx.topics or []
    out: list[dict[str, Any]] = []
    for t_req, t_resp in zip(topics_req, responses, strict=True):
        key = _topic_key(t_req, by_id)
        kept = []
        for p in t_resp["partitions"]:
            k = (key, p["partition_index"])
            cached = parts.get(k)
            if cached is None or not cached.must_respond(p, True):
                continue
            kept.append(p)
            if p["records"] and next(reversed(parts)) != k:  # served: to the end of the session's order
                parts[k] = parts.pop(k)
                session.topics = None
        if kept:
            t_resp["partitions"] = kept  # the read pass built it for this answer alone
            out.append(t_resp)
    return ErrorCode.NONE, session.id, out
