"""Timer scheduling for the coordinator: the event loop in production, a manual queue in tests.

The coordinator never sleeps or reads the loop: it asks a `Scheduler` to call it back after a
delay and cancels the handle when the reason goes away (heartbeat received, rebalance done).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol

from kafkad.clock import ManualClock


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class LoopScheduler:
    """Timers on an asyncio (uvloop) event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return self._loop.call_later(max(0, delay_ms) / 1000.0, callback)


class _ManualHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """Timers fired by `advance(ms)`, which also moves the ManualClock; for tests."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._seq = itertools.count()
        self._heap: list[tuple[int, int, _ManualHandle, Callable[[], None]]] = []

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        handle = _ManualHandle()
        due = self.clock.monotonic_ms() + max(0, delay_ms)
        heapq.heappush(self._heap, (due, next(self._seq), handle, callback))
        return handle

    def pending(self) -> int:
        return sum(1 for _, _, h, _ in self._heap if not h.cancelled)

    def advance(self, ms: int) -> None:
        """Move time forward by `ms`, firing each due timer at its own deadline, in order."""
        target = self.clock.monotonic_ms() + ms
        while self._heap and self._heap[0][0] <= target:
            due, _, handle, callback = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            now = self.clock.monotonic_ms()
            if due > now:
                self.clock.advance(due - now)
            callback()
        rest = target - self.clock.monotonic_ms()
        if rest > 0:
            self.clock.advance(rest)
