"""Jobs the worker processes run (see workers.py): confluent-kafka producers and consumers.

Each job gets the worker's pipe: it sets up, sends "ready", waits for "go", measures, returns a dict.
Times are time.monotonic_ns (CLOCK_MONOTONIC is system-wide on Linux, so a timestamp written by the
producer process can be subtracted in the consumer process).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import confluent_kafka as ck

# A value starts with its send time, monotonic_ns as 20 ASCII digits: readable by the Python consumer and
# by kcat's text output alike (a binary stamp may hold a newline).
_STAMP_LEN = 20


def _stamp(ns: int) -> bytes:
    return b"%020d" % ns


def _ready(conn: Connection) -> None:
    conn.send("ready")
    if conn.recv() != "go":
        raise RuntimeError("expected go")


def produce_throughput(
    conn: Connection, bootstrap: str, topic: str, size: int, duration_s: float, config: dict[str, Any]
) -> dict[str, Any]:
    """Produce `size`-byte values as fast as the client allows for `duration_s`, then flush."""
    errors = [0]

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors[0] += 1

    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
            "queue.buffering.max.messages": 1_000_000,
            **config,
        }
    )
    value = b"v" * size
    p.produce(topic, value)  # connect + metadata before the clock starts
    p.flush(30)
    produce = p.produce
    poll = p.poll
    _ready(conn)
    t0 = time.monotonic()
    end = t0 + duration_s
    n = 0
    while time.monotonic() < end:
        for _ in range(2000):
            try:
                produce(topic, value)
            except BufferError:  # local queue full: serve delivery reports until there is room
                while True:
                    poll(0.001)
                    try:
                        produce(topic, value)
                        break
                    except BufferError:
                        pass
        n += 2000
        poll(0)
    left = p.flush(60)
    elapsed = time.monotonic() - t0
    return {
        "records": n - left - errors[0],
        "bytes": (n - left - errors[0]) * size,
        "errors": errors[0],
        "s": elapsed,
    }


def produce_rate(
    conn: Connection,
    bootstrap: str,
    topic: str,
    size: int,
    rate: int,
    duration_s: float,
    config: dict[str, Any],
) -> dict[str, Any]:
    """Produce at a fixed rate, each value stamped with monotonic_ns; returns ack latencies (ms).

    Between records the loop sleeps until the next one is due and serves delivery reports with
    poll(0): a poll(0.0002) spin cost a third of a core of the 2 the broker shares, whatever the rate.
    """
    acks: list[float] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acks.append(msg.latency() * 1000.0)

    p = ck.Producer({"bootstrap.servers": bootstrap, "on_delivery": on_delivery, **config})
    pad = b"p" * max(0, size - _STAMP_LEN)
    p.produce(topic, _stamp(0) + pad)
    p.flush(30)
    acks.clear()
    _ready(conn)
    s0 = sched_self()
    t0 = time.monotonic_ns()
    total = int(rate * duration_s)
    sent = 0
    while sent < total:
        due = min(total, (time.monotonic_ns() - t0) * rate // 1_000_000_000 + 1)
        while sent < due:
            p.produce(topic, _stamp(time.monotonic_ns()) + pad)
            sent += 1
        p.poll(0)
        wait_ns = t0 + sent * 1_000_000_000 // rate - time.monotonic_ns()
        if wait_ns > 0:
            time.sleep(wait_ns / 1e9)
    p.flush(30)
    elapsed = (time.monotonic_ns() - t0) / 1e9
    return {"sent": sent, "s": elapsed, "ack_ms": acks, "sched": sched_delta(s0, sched_self())}


def sched_self(pid: int | str = "self") -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) summed over the process's threads.

    From /proc/<pid>/task/*/schedstat (Linux); the wait is what CPU contention costs a latency figure.
    """
    run = wait = 0
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/schedstat") as f:
                fields = f.read().split()
        except OSError:  # the thread ended
            continue
        run += int(fields[0])
        wait += int(fields[1])
    return run / 1e9, wait / 1e9


def sched_delta(a: tuple[float, float], b: tuple[float, float]) -> dict[str, float]:
    return {"cpu_s": b[0] - a[0], "runq_wait_s": b[1] - a[1]}


def consume_latency(
    conn: Connection, bootstrap: str, topic: str, expect: int, timeout_s: float, config: dict[str, Any]
) -> dict[str, Any]:
    """Read `expect` stamped records from the end of partition 0; returns end-to-end latencies (ms)."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            **config,
        }
    )
    # Start at the high watermark read now (OFFSET_END would be resolved lazily, possibly after the
    # producer's first records).
    _, high = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
    c.assign([ck.TopicPartition(topic, 0, high)])
    c.poll(0.5)  # fetch starts; the producer's warm-up record may arrive and is skipped below
    _ready(conn)
    s0 = sched_self()
    lat: list[float] = []
    deadline = time.monotonic() + timeout_s
    while len(lat) < expect and time.monotonic() < deadline:
        # poll() returns as soon as one record is there (consume(n, t) would wait to fill n until t).
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            stamp = int((m.value() or b"0")[:_STAMP_LEN])
            if stamp:
                lat.append((time.monotonic_ns() - stamp) / 1e6)
    s1 = sched_self()
    c.close()
    return {"e2e_ms": lat, "sched": sched_delta(s0, s1)}


def consume_latency_kcat(
    conn: Connection, bootstrap: str, topic: str, expect: int, timeout_s: float, config: dict[str, Any]
) -> dict[str, Any]:
    """consume_latency with a C consumer: kcat (librdkafka) tails partition 0 from the high watermark and
    prints each value on a line; this process reads the pipe and subtracts the stamp on arrival. Tells
    the broker's share of the end-to-end latency from the Python consumer's."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{time.monotonic_ns()}"})
    _, high = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
    c.close()
    settings = [x for k, v in {"fetch.wait.max.ms": 100, **config}.items() for x in ("-X", f"{k}={v}")]
    argv = ["kcat", "-C", "-u", "-q", "-b", bootstrap, "-t", topic, "-p", "0", "-o", str(high), "-f", "%s\n"]
    proc = subprocess.Popen([*argv, *settings], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    out = proc.stdout
    # kcat prints nothing until a record arrives: its fetch loop starts while the producer warms up, and
    # the warm-up record (stamp 0) is skipped below.
    _ready(conn)
    s0 = sched_self()
    kc0 = sched_self(proc.pid)
    lat: list[float] = []
    deadline = time.monotonic() + timeout_s
    stopper = threading.Timer(timeout_s, proc.terminate)  # a silent kcat would block readline forever
    stopper.start()
    try:
        while len(lat) < expect and time.monotonic() < deadline:
            line = out.readline()  # a buffered pipe: each call returns as soon as a line is there
            if not line:
                break
            stamp = int(line[:_STAMP_LEN])
            if stamp:
                lat.append((time.monotonic_ns() - stamp) / 1e6)
        kc = sched_delta(kc0, sched_self(proc.pid))
    finally:
        stopper.cancel()
        proc.terminate()
        proc.wait(10)
    s1 = sched_self()
    mine = sched_delta(s0, s1)
    both = {k: mine[k] + kc[k] for k in mine}  # the reader and kcat: the consumer side's CPU and wait
    return {"e2e_ms": lat, "sched": both}


def consume_all(
    conn: Connection, bootstrap: str, topic: str, end_offset: int, config: dict[str, Any]
) -> dict[str, Any]:
    """Catch up from offset 0 to `end_offset` with a confluent consumer; returns bytes and seconds."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"catchup-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            **config,
        }
    )
    c.assign([ck.TopicPartition(topic, 0, 0)])
    _ready(conn)
    t0 = time.monotonic()
    n = 0
    nbytes = 0
    last = -1
    while last + 1 < end_offset and time.monotonic() - t0 < 600:
        for m in c.consume(10000, 0.01):  # short timeout: the last call must not wait to fill 10000
            if m.error() is None:
                n += 1
                nbytes += len(m.value() or b"")
                last = m.offset() or 0
    elapsed = time.monotonic() - t0
    c.close()
    return {"records": n, "bytes": nbytes, "s": elapsed}


def raw_small_requests(
    conn: Connection, port: int, topic: str, connections: int, duration_s: float, record_size: int
) -> dict[str, Any]:
    """The raw 1-record-per-Produce client (raw_client.small_requests) in this worker's uvloop."""
    import asyncio

    import uvloop

    from tests.bench.raw_client import small_requests

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()

        async def go() -> None:  # after connect + warm-up; blocks only a thread on the pipe
            await loop.run_in_executor(None, _ready, conn)

        r = await small_requests("127.0.0.1", port, topic, connections, duration_s, record_size, go)
        return {"requests": r.requests, "s": r.seconds, "lat_us": r.latencies_us}

    return uvloop.run(main())


def raw_fetch(conn: Connection, port: int, topic: str, end_offset: int, max_bytes: int) -> dict[str, Any]:
    from tests.bench.raw_client import fetch_all

    _ready(conn)
    nbytes, s = fetch_all("127.0.0.1", port, topic, end_offset, max_bytes)
    return {"bytes": nbytes, "s": s}


def raw_drain(conn: Connection, port: int) -> dict[str, Any]:
    from tests.bench.raw_client import drain

    _ready(conn)
    nbytes, s = drain("127.0.0.1", port)
    return {"bytes": nbytes, "s": s}


def raw_produce_throughput(
    conn: Connection,
    port: int,
    topic: str,
    connections: int,
    duration_s: float,
    size: int,
    batch_bytes: int,
    acks: int,
    depth: int = 5,
) -> dict[str, Any]:
    """Pre-built batches, pipelined `depth` deep (raw_client.pipelined_produce): the server's limit without
    client cost."""
    import asyncio

    import uvloop

    from tests.bench.raw_client import make_batch, pipelined_produce

    per_batch = max(1, batch_bytes // (size + 10))
    batch = make_batch(size, per_batch)

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()

        async def go() -> None:
            await loop.run_in_executor(None, _ready, conn)

        n, s = await pipelined_produce(
            "127.0.0.1", port, topic, connections, duration_s, batch, acks, go, depth
        )
        return {"records": n * per_batch, "bytes": n * per_batch * size, "errors": 0, "s": s}

    return uvloop.run(main())


def txn_produce_throughput(
    conn: Connection,
    bootstrap: str,
    topic: str,
    size: int,
    duration_s: float,
    commit_interval_s: float,
    config: dict[str, Any],
) -> dict[str, Any]:
    """produce_throughput inside transactions: begin, produce as fast as the client allows, commit every
    `commit_interval_s`, for `duration_s`; counts the records of committed transactions."""
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{os.getpid()}-{time.monotonic_ns()}",
            "queue.buffering.max.messages": 1_000_000,
            **config,
        }
    )
    p.init_transactions(60)
    value = b"v" * size
    p.begin_transaction()  # connect + metadata + the partition added before the clock starts
    p.produce(topic, value)
    p.commit_transaction(60)
    produce = p.produce
    _ready(conn)
    t0 = time.monotonic()
    end = t0 + duration_s
    committed = 0
    commits = 0
    while time.monotonic() < end:
        p.begin_transaction()
        n = 0
        close_at = min(end, time.monotonic() + commit_interval_s)
        while time.monotonic() < close_at:
            for _ in range(500):
                try:
                    produce(topic, value)
                except BufferError:
                    p.poll(0.001)
                    continue
                n += 1
            p.poll(0)
        p.commit_transaction(60)
        committed += n
        commits += 1
    elapsed = time.monotonic() - t0
    return {"records": committed, "bytes": committed * size, "commits": commits, "s": elapsed}


def consume_to_end(
    conn: Connection, bootstrap: str, topic: str, partitions: int, config: dict[str, Any]
) -> dict[str, Any]:
    """Catch up every partition from offset 0 to its end (high watermark, or the last stable offset for
    read_committed) with a confluent consumer: done when the position passed the end, which also counts
    the control records and aborted data a read_committed consumer skips."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"catchup-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            **config,
        }
    )
    tps = [ck.TopicPartition(topic, p, 0) for p in range(partitions)]
    ends = {tp.partition: c.get_watermark_offsets(tp, timeout=30, cached=False)[1] for tp in tps}
    c.assign(tps)
    _ready(conn)
    t0 = time.monotonic()
    n = 0
    nbytes = 0
    while time.monotonic() - t0 < 600:
        for m in c.consume(10000, 0.01):
            if m.error() is None:
                n += 1
                nbytes += len(m.value() or b"")
        pos = c.position([ck.TopicPartition(topic, p) for p in ends])
        if all(tp.offset >= ends[tp.partition] for tp in pos):
            break
    elapsed = time.monotonic() - t0
    c.close()
    return {"records": n, "bytes": nbytes, "s": elapsed}
