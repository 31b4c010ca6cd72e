"""The log cleaner's schedule in the daemon (Kafka's `CleanerThread` loop, on asyncio).

Loop: pick the filthiest compacted log on the event loop; clean it in the default executor; the
cleaning thread hands each rewritten group back to the loop (`run_coroutine_threadsafe`) for the swap,
so the segment list only ever changes on the loop. With nothing to clean it sleeps
log.cleaner.backoff.ms. `stop()` makes pending swaps refuse (the thread finishes the group it is
writing and ends) and waits for the loop to exit, so LogManager.shutdown never races a cleaning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kafkad.storage.cleaner import CleanTask, LogCleaner
from kafkad.storage.cleaner_rewrite import CleanedGroup
from kafkad.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)


class CleanerService:
    def __init__(self, cleaner: LogCleaner, backoff_ms: int) -> None:
        self.cleaner = cleaner
        self.backoff_s = max(backoff_ms, 1) / 1000
        self._stopping = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="log-cleaner")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _swap_from_thread(self, plog: PartitionLog, group: CleanedGroup) -> bool:
        """Called on the cleaning thread: run the swap on the loop and wait for its answer."""
        loop = self._loop
        if self._stopping or loop is None:
            return False

        async def swap() -> bool:
            return not self._stopping and self.cleaner.swap_on_loop(plog, group)

        return asyncio.run_coroutine_threadsafe(swap(), loop).result()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            task: CleanTask | None = None
            try:
                task = self.cleaner.grab_filthiest()
                if task is not None:
                    stats = await loop.run_in_executor(None, self.cleaner.clean, task, self._swap_from_thread)
                    if stats.completed:
                        continue  # more may be dirty: Kafka's thread only backs off when idle
            except Exception:
                log.exception("log cleaner pass failed")
            finally:
                if task is not None:
                    self.cleaner.done(task)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.backoff_s)
