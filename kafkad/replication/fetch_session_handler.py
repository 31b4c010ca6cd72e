"""The follower's side of a fetch session (KIP-227; Kafka's FetchSessionHandler, simplified where the
protocol allows it).

A fetcher's first Fetch asks for a session (session id 0, epoch 0) with every partition; once the leader
answers a session id, each next Fetch carries that id and the next epoch and lists only the partitions whose
fields (leader epoch, fetch offset, log start offset) changed since the leader last saw them: a follower
that appended to one partition of a thousand sends one. The leader reads the others from the session and
answers only partitions that changed (fetch_session.py).

Where Kafka's handler would list removed partitions in `forgotten_topics_data`, this one closes the session
and opens a new one with a full request (session id, epoch 0), which the protocol defines the same way;
a fetcher's partition set changes on LeaderAndIsr, backoff and truncation, not per fetch. Any error
(a session error, another top-level error, a lost connection) does the same; FETCH_SESSION_ID_NOT_FOUND
starts from session id 0. A leader that answers session id 0 (its cache is full, or sessions are off)
leaves every request full, each asking again.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkad.protocol import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0

# (topic, partition, current leader epoch, fetch_offset, log_start_offset): fetch_request.FetchPartition
Wanted = tuple[str, int, int, int, int]


def _next_epoch(epoch: int) -> int:
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


class FetchSessionHandler:
    """Builds each request's (session id, epoch, partitions to list) and follows the answers."""

    __slots__ = ("_pending", "_sent", "epoch", "session_id")

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[tuple[str, int], Wanted] = {}  # what the leader's session holds
        self._pending: Sequence[Wanted] = ()  # listed in the request in flight

    def build(self, wanted: Sequence[Wanted]) -> tuple[int, int, Sequence[Wanted]]:
        """(session id, epoch, partitions to list) for a Fetch of `wanted`."""
        sent = self._sent
        if self.epoch != INITIAL_EPOCH and len(sent) == len(wanted):
            changed = []
            for w in wanted:
                before = sent.get((w[0], w[1]))
                if before is None:  # another set of partitions: a full request, new session
                    break
                if before != w:
                    changed.append(w)
            else:
                self._pending = changed
                return self.session_id, self.epoch, changed
        self.epoch = INITIAL_EPOCH  # close the session (if any), open a new one
        self._sent = {}
        self._pending = wanted
        return self.session_id, INITIAL_EPOCH, wanted

    def handle_response(self, error: int, session_id: int) -> None:
        """The leader's answer to the request `build` made."""
        if error:
            self.failed(error)
            return
        if self.epoch == INITIAL_EPOCH:
            self.session_id = session_id
            if session_id == INVALID_SESSION_ID:  # no session: the next request is full again
                self._sent = {}
                return
            self._sent = {(w[0], w[1]): w for w in self._pending}
            self.epoch = 1
            return
        sent = self._sent
        for w in self._pending:
            sent[(w[0], w[1])] = w
        self.epoch = _next_epoch(self.epoch)

    def failed(self, error: int = 0) -> None:
        """A request failed (a top-level error, or no answer): the next one is full."""
        if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent = {}
