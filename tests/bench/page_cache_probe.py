"""What appending to the page cache costs right now: CPU microseconds per 4 KiB page of a buffered write.

Why: on this machine (a Firecracker VM whose balloon reports freed guest memory to the host,
`page_reporting.page_reporting_order` on the kernel command line) a page the host no longer backs costs a
host fault on first touch. Once a bench grows the page cache past the memory the host still backs (~8 GB of
new data seen), every buffered write pays ~9 us per 4 KiB page more than the usual ~1 (7x the CPU of an 80 KiB
segment append), for every process on the machine, until files are deleted and their pages reused. Rows
measured in that regime move 1.5-2x (acks=1 baselines, followers' CPU per GiB) with nothing changed in
kafkad. A bench records this probe beside such rows so that a run in the slow regime shows as one.

How: `--mib` MiB written in 80 KiB writes (a follower's append of a few batches) to a new file in `where`,
thread CPU time around each write, the median per page; the file is deleted (its pages go back to the pool).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

PAGE = 4096
CHUNK = 80 * 1024


def append_us_per_page(where: Path, mib: int = 8) -> float:
    """Median thread-CPU microseconds per 4 KiB page of an 80 KiB buffered append under `where`."""
    data = os.urandom(CHUNK)
    fd, path = tempfile.mkstemp(prefix="page-cache-probe-", dir=where)
    try:
        costs = []
        for _ in range((mib << 20) // CHUNK):
            t = time.thread_time()
            os.write(fd, data)
            costs.append(time.thread_time() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    return 1e6 * statistics.median(costs) / (CHUNK // PAGE)


def wait_fast(where: Path, *, limit_us: float = 2.0, timeout_s: float = 15.0) -> float:
    """Probe until an append costs at most `limit_us` per page (the slow regime passes within seconds once
    the heavy writing stops) or `timeout_s` passed; returns the seconds waited. A bench calls it before each
    measured run and baseline, so that both start in the regime real hardware is always in."""
    start = time.monotonic()
    while append_us_per_page(where, mib=2) > limit_us and time.monotonic() - start < timeout_s:
        time.sleep(0.2)  # a bounded poll of the machine's state, not a wait on the system under test
    return time.monotonic() - start
