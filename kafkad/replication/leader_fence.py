"""A leader's guard against writes on leaderships it may have lost while it was not running (cluster mode).

A broker frozen (SIGSTOP, a paused VM, a process stuck in the kernel) for longer than its ZooKeeper session
loses the session: the controller moves its leaderships and the other replicas take writes. When it runs
again it still believes it leads and answers what waited in its sockets before anything (kazoo's thread,
the controller's LeaderAndIsr) can tell it otherwise: an idempotent producer's next batch meets producer
state older than the producer and gets OUT_OF_ORDER_SEQUENCE_NUMBER (which clients treat as fatal), an
acks=1 write is acknowledged and truncated away when the broker learns it follows. Kafka has the same window.

The fence closes it. A timer on the event loop ticks every `tick_s`; a gap between two ticks, or between the
last tick and a Produce, longer than `max_gap_s` (half the session timeout: ZooKeeper expires a session
after the session timeout without a ping and kazoo pings every third of it, so a shorter freeze cannot have
cost it) means the session may be gone. Produce is then refused with NOT_LEADER_OR_FOLLOWER (retriable: the
client refreshes its metadata and retries) until one of:
- `confirm`: the session we had is still ZooKeeper's (cluster mode reads our /brokers/ids znode's owner);
- `on_leader_and_isr`: a LeaderAndIsr addressed to a registration newer than the one we had when fenced
  (its broker epoch), i.e. the controller has told us what we lead now.
A lost session (kazoo's LOST) fences as well, lifted only by the second way. A loop stall that long while
the process ran (the session then lived on through kazoo's own thread) costs one ZooKeeper read of
NOT_LEADER_OR_FOLLOWER answers. Runs on the event loop; `check` is one clock read per Produce.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kafkad.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

TICK_S = 0.1


class LeaderFence:
    def __init__(
        self,
        max_gap_s: float,
        *,
        tick_s: float = TICK_S,
        on_fence: Callable[[int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_gap_s = max_gap_s
        self.tick_s = tick_s
        self.on_fence = on_fence  # called with the episode number when a fence starts
        self.broker_epoch = -1  # of our current registration (cluster mode keeps it current)
        self._clock = clock
        self._last_tick = clock()
        self._fenced = False
        self._episode = 0
        self._epoch_at_fence = -1
        self._handle: asyncio.TimerHandle | None = None

    @property
    def fenced(self) -> bool:
        return self._fenced

    @property
    def episode(self) -> int:
        """Counts fences: a confirmation started for one fence must not lift a later one."""
        return self._episode

    def start(self) -> None:
        self._last_tick = self._clock()
        self._handle = asyncio.get_running_loop().call_later(self.tick_s, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        now = self._clock()
        gap = now - self._last_tick
        if gap > self.max_gap_s:
            self.fence(self._gap_reason(gap))
        self._last_tick = now
        self._handle = asyncio.get_running_loop().call_later(self.tick_s, self._tick)

    def check(self) -> None:
        """Raise NOT_LEADER_OR_FOLLOWER while fenced, or if the loop has not ticked for too long (the
        request was read before the first tick after a freeze)."""
        if not self._fenced:
            gap = self._clock() - self._last_tick
            if gap <= self.max_gap_s:
                return
            self.fence(self._gap_reason(gap))
        raise KafkaError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            "this broker's ZooKeeper session may have expired while it was not running; "
            "waiting for the controller to confirm its leaderships",
        )

    def _gap_reason(self, gap: float) -> str:
        return (
            f"its event loop did not run for {gap:.1f} s (frozen or stalled longer than half the ZooKeeper "
            "session: the session may have expired meanwhile)"
        )

    def fence(self, why: str, *, session_lost: bool = False) -> None:
        """Refuse Produce from now on. `session_lost`: kazoo saw the session expire, so only the controller's
        LeaderAndIsr lifts it (a confirmation already under way for an earlier fence is void)."""
        if self._fenced and not session_lost:
            return
        if not self._fenced:
            log.warning("refusing produce requests as leader: %s", why)
            self._epoch_at_fence = self.broker_epoch
        self._fenced = True
        self._episode += 1
        if not session_lost and self.on_fence is not None:
            self.on_fence(self._episode)

    def confirm(self, episode: int) -> None:
        """Our session outlived fence `episode`: the leaderships we hold are the controller's."""
        if self._fenced and episode == self._episode:
            self._lift("the ZooKeeper session is the one it had")

    def on_leader_and_isr(self, broker_epoch: int) -> None:
        """A LeaderAndIsr for registration `broker_epoch` was applied."""
        if self._fenced and broker_epoch > self._epoch_at_fence:
            self._lift(
                f"the controller sent LeaderAndIsr for its new registration (broker epoch {broker_epoch})"
            )

    def _lift(self, why: str) -> None:
        self._fenced = False
        self._last_tick = self._clock()
        log.info("accepting produce requests as leader again: %s", why)
