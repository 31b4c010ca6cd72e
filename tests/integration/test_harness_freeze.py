"""The harness's SIGSTOP (`freeze`): it returns only once every thread of the process is stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.integration.broker_process import freeze, thread_states

_BUSY = """
import threading
def spin():
    while True:
        pass
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
spin()
"""


def test_freeze_returns_with_every_thread_stopped() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _BUSY], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        assert len(thread_states(proc.pid)) == 4
        for _ in range(3):
            freeze(proc.pid)
            assert set(thread_states(proc.pid)) <= {"T", "t"}, thread_states(proc.pid)
            os.kill(proc.pid, signal.SIGCONT)
            deadline = time.monotonic() + 10
            while set(thread_states(proc.pid)) <= {"T", "t"}:  # running again (R, or S between slices)
                assert time.monotonic() < deadline, "still stopped after SIGCONT"
                time.sleep(0.001)
    finally:
        proc.kill()
        proc.wait()
