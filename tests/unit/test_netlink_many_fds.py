"""The netlink watcher keeps following addresses in a broker holding more than 1024 descriptors.

A broker with many partitions has thousands of segment files open; the watcher's wait used select(),
which raises ValueError for a descriptor past 1024, so its thread died at the first wait.
"""

from __future__ import annotations

import asyncio
import os

from kafkad.service.netlink import NetlinkWatcher


def test_watcher_survives_descriptors_past_1024() -> None:
    hog = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:

        async def run() -> bool:
            loop = asyncio.get_running_loop()
            dumped = asyncio.Event()
            watcher = NetlinkWatcher(["lo"], lambda _m: dumped.set(), loop)
            await loop.run_in_executor(None, watcher.start)
            await asyncio.wait_for(dumped.wait(), 30)  # subscribed and dumped: the wait comes next
            thread = watcher._thread
            assert thread is not None
            # A dead watcher ends at once; a live one blocks in its wait until stop() wakes it.
            await loop.run_in_executor(None, thread.join, 1.0)
            alive = thread.is_alive()
            await loop.run_in_executor(None, watcher.stop)
            return alive

        assert asyncio.run(run()), "the netlink watcher thread died"
    finally:
        for fd in hog:
            os.close(fd)
