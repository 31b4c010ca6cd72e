"""Client load in separate processes: a small pool of spawned workers that run named jobs.

How it works: each worker is a `spawn`ed process (librdkafka's threads do not survive fork) holding one
end of a Pipe. `Pool.run(jobs)` sends one job per worker; each job sets up (connects, warms up), answers
"ready", waits for "go", does its measured work and sends back a dict. The parent sends "go" to every
worker at once, so N producers start together and the parent can meter the server's CPU from "go" to
the last result. Jobs are functions in tests/bench/jobs.py, looked up by name.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    kwargs: dict[str, Any]


@dataclass(frozen=True, slots=True)
class JobResults:
    results: list[dict[str, Any]]
    wall_s: float  # from "go" to the last result


def _serve(conn: Connection) -> None:
    from tests.bench import jobs

    while True:
        msg = conn.recv()
        if msg is None:
            return
        name, kwargs = msg
        fn: Callable[..., dict[str, Any]] = getattr(jobs, name)
        try:
            conn.send(fn(conn, **kwargs))
        except Exception as e:  # report, keep the worker alive for the next job
            conn.send({"error": f"{type(e).__name__}: {e}"})


class Pool:
    """`size` worker processes; one job each per `run`."""

    def __init__(self, size: int) -> None:
        ctx = mp.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs: list[mp.process.BaseProcess] = []
        for _ in range(size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child,), daemon=True)
            proc.start()
            self._conns.append(parent)
            self._procs.append(proc)

    def run(
        self, jobs: Sequence[Job], on_go: Callable[[], None] | None = None, timeout_s: float = 300.0
    ) -> JobResults:
        """Run jobs[i] on worker i; `on_go` runs right before the start signal (start meters there)."""
        if len(jobs) > len(self._conns):
            raise ValueError("more jobs than workers")
        conns = self._conns[: len(jobs)]
        for conn, job in zip(conns, jobs, strict=True):
            conn.send((job.name, job.kwargs))
        for conn in conns:
            if not conn.poll(timeout_s):
                raise TimeoutError("worker did not get ready")
            ready = conn.recv()
            if ready != "ready":
                raise RuntimeError(f"worker failed during setup: {ready}")
        if on_go is not None:
            on_go()
        t0 = time.monotonic()
        for conn in conns:
            conn.send("go")
        results = []
        for conn in conns:
            if not conn.poll(timeout_s):
                raise TimeoutError("worker did not finish")
            results.append(conn.recv())
        wall = time.monotonic() - t0
        for r in results:
            if "error" in r:
                raise RuntimeError(f"worker job failed: {r['error']}")
        return JobResults(results, wall)

    def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send(None)
        for proc in self._procs:
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
