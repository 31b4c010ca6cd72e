"""The floor of the replication scenario's acks=all / acks=1 row on this machine: a broker that does no work.

How it works: four processes as in the replication scenario (a producer, a leader, two followers), each a
uvloop loop speaking a minimal length-prefixed protocol on loopback, with none of Kafka's work (no codec,
no CRC, no index, no session): the producer keeps `--depth` requests of `--batch-kb` KiB in flight on one
connection per `--connections`; the leader appends each request's payload to a file (one os.write, as a
segment append) and answers it at once (acks=1) or once both followers' fetch offsets cover it (acks=all);
each follower keeps one fetch parked at the leader (Kafka's long poll, min.bytes 1), appends what it gets
to its own file and sends its next fetch with its new end offset (the leader's only news of replication,
as in Kafka). The leader answers a parked fetch one poll after an append (call_soon), as kafkad's leader.

What it tells: the acks=all / acks=1 ratio that no implementation of Kafka's replication protocol can beat
on this machine with these processes, since every in-process cost here is close to nil; the gap between it
and kafkad's row is kafkad's own. `--work-us`, `--follower-us` and `--hops` add a broker's costs back (busy
loops, call_soon chains), to see what a given cost per step does to the ratio. Run:
.venv/bin/python -m tests.bench.replication_floor [--seconds 3] [--rounds 3] [--connections 1] [--depth 5]
[--batch-kb 16] [--work-us 42 --follower-us 57 --hops 3]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import multiprocessing as mp
import os
import socket
import statistics
import struct
import tempfile
import time
from typing import Any, NamedTuple

import uvloop

from tests.bench.bench_replication import _cpu

_LEN = struct.Struct(">I")
_OFF = struct.Struct(">q")
# Stand-ins for a broker's costs, set per process from the command line (_knobs):
WORK_S = 0.0  # busy CPU on the leader per produce and per fetch (--work-us)
FOLLOWER_S: float | None = None  # busy CPU on a follower per fetch (--follower-us; default WORK_S)
HOPS = 0  # loop iterations before the leader sends an acks=all answer or a fetch answer (--hops)


def _spin(work_s: float | None = None) -> None:
    work_s = WORK_S if work_s is None else work_s
    if work_s:
        end = time.perf_counter() + work_s
        while time.perf_counter() < end:
            pass


def _later(fn: Any, *args: Any) -> None:
    """`fn(*args)` after HOPS loop iterations (at once with 0)."""
    if not HOPS:
        fn(*args)
        return
    loop = asyncio.get_running_loop()

    def hop(left: int) -> None:
        if left:
            loop.call_soon(hop, left - 1)
        else:
            fn(*args)

    loop.call_soon(hop, HOPS - 1)


class _Framed(asyncio.Protocol):
    """Length-prefixed frames in, `on_frame(self, frame)` per frame."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            (n,) = _LEN.unpack_from(buf, pos)
            if len(buf) - pos - 4 < n:
                break
            self.on_frame(bytes(buf[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        del buf[:pos]

    def send(self, payload: bytes) -> None:
        if not self.transport.is_closing():  # a peer gone at the end of a round
            self.transport.write(_LEN.pack(len(payload)) + payload)

    def on_frame(self, frame: bytes) -> None:
        raise NotImplementedError


class _Leader:
    def __init__(self, path: str, acks: int) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.acks = acks
        self.data: list[bytes] = []  # payloads in order (the log), for followers' reads
        self.ends: list[int] = []  # end offset (bytes) after each payload
        self.end = 0
        self.follower_pos: dict[int, int] = {}
        self.waiting: list[tuple[int, _Framed]] = []  # (end offset, producer connection): acks=all
        self.parked: dict[int, tuple[_Framed, int]] = {}  # follower -> (its connection, its offset)
        self.settle_scheduled = False

    def append(self, conn: _Framed, payload: bytes) -> None:
        _spin()
        os.write(self.fd, payload)
        self.data.append(payload)
        self.end += len(payload)
        self.ends.append(self.end)
        if self.acks == 1:
            conn.send(b"ok")
        else:
            self.waiting.append((self.end, conn))
        if self.parked and not self.settle_scheduled:
            self.settle_scheduled = True
            asyncio.get_running_loop().call_soon(self._settle)

    def _settle(self) -> None:
        self.settle_scheduled = False
        parked, self.parked = self.parked, {}
        for fid, (conn, offset) in parked.items():
            self._answer(fid, conn, offset)

    def fetch(self, fid: int, conn: _Framed, offset: int) -> None:
        _spin()
        self.follower_pos[fid] = offset
        if len(self.follower_pos) == 2 and self.waiting:
            hw = min(self.follower_pos.values())
            done = 0
            for end, pconn in self.waiting:
                if end > hw:
                    break
                _later(pconn.send, b"ok")
                done += 1
            if done:
                del self.waiting[:done]
        if offset < self.end:
            self._answer(fid, conn, offset)
        else:
            self.parked[fid] = (conn, offset)

    def _answer(self, fid: int, conn: _Framed, offset: int) -> None:
        # the payloads after `offset` (whole ones; followers ask at payload boundaries)
        i = bisect.bisect_right(self.ends, offset)
        _later(conn.send, b"".join(self.data[i:]))
        if len(self.data) > 4096:  # keep memory bounded: followers are never far behind
            low = min(self.follower_pos.values(), default=0)
            k = bisect.bisect_right(self.ends, low)
            if k > 2048:
                del self.data[:k]
                del self.ends[:k]


def _knobs(work_s: float, hops: int, follower_s: float | None) -> None:
    global WORK_S, HOPS, FOLLOWER_S
    WORK_S, HOPS, FOLLOWER_S = work_s, hops, follower_s


def _leader_main(port_q: Any, path: str, acks: int, knobs: tuple[float, int, float | None]) -> None:
    _knobs(*knobs)

    async def run() -> None:
        leader = _Leader(path, acks)

        class Conn(_Framed):
            def on_frame(self, frame: bytes) -> None:
                kind = frame[0]
                if kind == 0x50:  # "P": produce
                    leader.append(self, frame[1:])
                else:  # "F": fetch, follower id, offset
                    leader.fetch(frame[1], self, _OFF.unpack_from(frame, 2)[0])

        server = await asyncio.get_running_loop().create_server(Conn, "127.0.0.1", 0)
        port_q.put(server.sockets[0].getsockname()[1])
        await asyncio.Future()

    uvloop.run(run())


def _follower_main(
    port: int, fid: int, path: str, knobs: tuple[float, int, float | None], fetches: Any, ready: Any
) -> None:
    _knobs(*knobs)

    async def run() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        state = {"offset": 0}

        class Conn(_Framed):
            def on_frame(self, frame: bytes) -> None:
                _spin(FOLLOWER_S)
                os.write(fd, frame)
                state["offset"] += len(frame)
                fetches.value += 1
                self.send(b"F" + bytes([fid]) + _OFF.pack(state["offset"]))

        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(Conn, "127.0.0.1", port)
        conn.send(b"F" + bytes([fid]) + _OFF.pack(0))
        ready.put(fid)
        await asyncio.Future()

    uvloop.run(run())


def _producer_main(port: int, connections: int, depth: int, batch: int, seconds: float, out: Any) -> None:
    async def run() -> None:
        payload = b"P" + os.urandom(batch)
        loop = asyncio.get_running_loop()
        done = [0]
        stop_at = [0.0]
        finished = loop.create_future()

        class Conn(_Framed):
            def on_frame(self, frame: bytes) -> None:
                done[0] += 1
                if time.monotonic() < stop_at[0]:
                    self.send(payload)
                elif not finished.done():
                    finished.set_result(None)

        conns = [(await loop.create_connection(Conn, "127.0.0.1", port))[1] for _ in range(connections)]
        # warm up 0.5 s, then count
        stop_at[0] = time.monotonic() + 0.5 + seconds
        for c in conns:
            for _ in range(depth):
                c.send(payload)
        await asyncio.sleep(0.5)
        out.put("start")
        start, first = time.monotonic(), done[0]
        await asyncio.sleep(seconds)
        out.put((done[0] - first) / (time.monotonic() - start))

    uvloop.run(run())


class Round(NamedTuple):
    rate: float  # requests per second
    leader_us: float  # leader CPU per request
    follower_us: float  # a follower's CPU per fetch
    per_fetch: float  # requests per follower fetch


def one_round(
    acks: int,
    connections: int,
    depth: int,
    batch: int,
    seconds: float,
    knobs: tuple[float, int, float | None] = (0.0, 0, None),
) -> Round:
    """One cluster of the four processes under load."""
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="kafkad-floor-") as tmp:
        q = ctx.Queue()
        leader = ctx.Process(target=_leader_main, args=(q, f"{tmp}/leader", acks, knobs), daemon=True)
        leader.start()
        port = q.get(timeout=30)
        counts = [ctx.RawValue("q", 0) for _ in (0, 1)]
        ready = ctx.Queue()
        followers = [
            ctx.Process(
                target=_follower_main, args=(port, i, f"{tmp}/f{i}", knobs, counts[i], ready), daemon=True
            )
            for i in (0, 1)
        ]
        for f in followers:
            f.start()
        for _ in followers:  # both connected, their first fetch sent
            ready.get(timeout=30)
        out = ctx.Queue()
        prod = ctx.Process(target=_producer_main, args=(port, connections, depth, batch, seconds, out))
        prod.start()
        assert out.get(timeout=30) == "start"
        pids = [p.pid or 0 for p in (leader, *followers)]
        cpu0, n0, t0 = [_cpu(p) for p in pids], [c.value for c in counts], time.monotonic()
        rate = float(out.get(timeout=seconds + 30))
        cpu1, n1, t1 = [_cpu(p) for p in pids], [c.value for c in counts], time.monotonic()
        prod.join(10)
        requests = rate * (t1 - t0)
        fetches = sum(n1) - sum(n0)
        for p in (leader, *followers):
            p.terminate()
            p.join(10)
        return Round(
            rate,
            1e6 * (cpu1[0] - cpu0[0]) / requests,
            1e6 * (cpu1[1] + cpu1[2] - cpu0[1] - cpu0[2]) / max(1, fetches),
            2 * requests / max(1, fetches),
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--depth", type=int, default=5)
    p.add_argument("--batch-kb", type=int, default=16)
    p.add_argument("--work-us", type=float, default=0.0, help="busy CPU per produce and per fetch")
    p.add_argument("--follower-us", type=float, default=None, help="busy CPU per fetch on a follower")
    p.add_argument("--hops", type=int, default=0, help="loop iterations before the leader answers")
    a = p.parse_args()
    knobs = (a.work_us / 1e6, a.hops, None if a.follower_us is None else a.follower_us / 1e6)
    ratios, all_rates, one_rates = [], [], []
    for _ in range(a.rounds):
        one = one_round(1, a.connections, a.depth, a.batch_kb << 10, a.seconds, knobs)
        every = one_round(-1, a.connections, a.depth, a.batch_kb << 10, a.seconds, knobs)
        one_rates.append(one.rate)
        all_rates.append(every.rate)
        ratios.append(every.rate / one.rate)
        print(
            f"acks=1 {one.rate:,.0f} req/s, acks=all {every.rate:,.0f} req/s, ratio {ratios[-1]:.3f}; "
            f"acks=all: leader {every.leader_us:.0f} us/request, follower {every.follower_us:.0f} us/fetch, "
            f"{every.per_fetch:.2f} requests/fetch",
            flush=True,
        )
    print(
        f"x{a.connections} depth {a.depth}: acks=all / acks=1 min / median / max "
        f"{min(ratios):.3f} / {statistics.median(ratios):.3f} / {max(ratios):.3f}; "
        f"acks=all mean latency {1e3 * a.connections * a.depth / statistics.median(all_rates):.3f} ms, "
        f"acks=1 {1e3 * a.connections * a.depth / statistics.median(one_rates):.3f} ms"
    )


if __name__ == "__main__":
    main()
