"""CPU of one replication fetch round, in process: the leader's side (a follower's Fetch v11 frame through
the Dispatcher: decode, handler, response encode) and the follower's (request build in its session, response
decode, append of one 16 KiB batch), per call, with no sockets and no event-loop wake-ups.

How it works: a standalone Broker (tests.unit.daemon.test_handlers.make_broker, a real LogManager in a temp
dir) leads one partition with replicas (0, 5); the leader side dispatches a follower (replica_id 5) Fetch of
one 16 KiB batch `--calls` times, sessionless and in a fetch session (its fetch offset alternating between
two batches, so each incremental request lists the partition as the follower's does). The follower side
runs the real FetchSessionHandler, FetchEncoder, decode_fetch_response_session and a PartitionLog append
(AppendOrigin.REPLICATION) of the batch the leader answered; a consumer's Fetch v11 of one batch (the
standalone fetch path) and a Produce v8 acks=1 of one batch to a partition with ISR = {self} (the standalone
produce path) are timed beside them. Prints min / median / max over `--rounds` rounds.
A/B: run it in two worktrees alternately (base, head, base, head) with the same arguments.

Run: PYTHONPATH=$PWD .venv/bin/python -m tests.bench.bench_fetch_round [--rounds 7] [--calls 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

from kafkad.clock import SystemClock
from kafkad.network.dispatcher import Dispatcher
from kafkad.network.registry import REGISTRY
from kafkad.replication.fetch_request import FetchEncoder
from kafkad.replication.fetch_response import decode_fetch_response_session
from kafkad.replication.fetch_session_handler import FetchSessionHandler
from kafkad.replication.fetcher import FetcherConfig
from kafkad.storage.log_config import LogConfig
from kafkad.storage.log_types import AppendOrigin
from kafkad.storage.partition_log import PartitionLog
from tests.bench.raw_client import make_batch, produce_request
from tests.unit.daemon.test_handlers import create, make_broker

FOLLOWER = 5
BATCH = make_batch(100, 16384 // 110)


def _response_bytes(out: Any) -> bytearray:
    """A dispatched response's chunks as the follower receives them (records read from the file)."""
    buf = bytearray()
    for c in out:
        buf += c if isinstance(c, (bytes, bytearray, memoryview)) else c.read()
    return buf[4:]  # without the size prefix, as BrokerChannel hands the frame


def _leader_round(d: Dispatcher, frames: list[bytearray], calls: int) -> float:
    t0 = time.thread_time()
    for i in range(calls):
        out = d.dispatch(frames[i & 1], "bench")
        assert isinstance(out, list)
    return (time.thread_time() - t0) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=4000)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fetch-round-") as tmp:
        b = make_broker(Path(tmp))
        create(b, "t")
        part = b.replicas.get_or_raise("t", 0)
        part.become_leader(1, isr=(0, FOLLOWER), replicas=(0, FOLLOWER))
        for _ in range(3):
            part.append_as_leader(memoryview(bytearray(BATCH)), now_ms=0, required_acks=1)
        per = struct.unpack_from(">i", BATCH, 57)[0]  # the batch's record count
        offsets = (per, 2 * per)  # two batches, each read whole (partition_max_bytes = one batch)
        cfg = FetcherConfig(broker_id=FOLLOWER, partition_max_bytes=len(BATCH), max_wait_ms=0)
        enc = FetchEncoder(cfg, "bench")
        d = Dispatcher(b, REGISTRY)

        def frames(session_id: int, epoch: int) -> list[bytearray]:
            return [enc.frame([("t", 0, 1, o, 0)], session_id, epoch)[4:] for o in offsets]

        create(b, "p")
        produce = bytearray(produce_request("p", 0, BATCH, 1)[4:])
        consumer_enc = FetchEncoder(cfg._replace(broker_id=-1), "bench-consumer")
        consumer = [consumer_enc.frame([("t", 0, 1, o, 0)])[4:] for o in (0, per)]

        async def run() -> dict[str, list[float]]:
            out: dict[str, list[float]] = {
                "leader sessionless": [],
                "leader in session": [],
                "consumer sessionless": [],
                "produce acks=1": [],
                "follower": [],
            }
            part.update_follower_position(FOLLOWER, 3 * per)  # the HW covers what consumers read
            answer = _response_bytes(d.dispatch(consumer[1], "bench"))
            assert len(answer) > len(BATCH), "the consumer's fetch read no batch"
            # a session: the first (full) request opens it; incremental ones then list the partition
            first = _response_bytes(d.dispatch(frames(0, 0)[0], "bench"))
            session_id = struct.unpack_from(">i", first, 10)[0]
            assert session_id != 0, "no session"
            epoch = 1
            response = _response_bytes(d.dispatch(frames(0, -1)[0], "bench"))
            records_at = len(response) - len(BATCH)
            for _ in range(a.rounds):
                out["leader sessionless"].append(_leader_round(d, frames(0, -1), a.calls))
                incr = []  # the session's epoch advances per request: one frame per call
                for i in range(a.calls):
                    incr.append(enc.frame([("t", 0, 1, offsets[i & 1], 0)], session_id, epoch)[4:])
                    epoch += 1
                t0 = time.thread_time()
                for f in incr:
                    out_chunks = d.dispatch(f, "bench")
                took = (time.thread_time() - t0) / a.calls * 1e6
                last = _response_bytes(out_chunks)
                assert struct.unpack_from(">h", last, 8)[0] == 0 and len(last) == len(response), (
                    "session error"
                )
                out["leader in session"].append(took)
                # a consumer's Fetch v11 (replica_id -1) of one batch below the HW: the standalone path
                out["consumer sessionless"].append(_leader_round(d, consumer, a.calls))
                # a Produce v8 acks=1 of one 16 KiB batch to a partition with ISR = {self} (standalone)
                n = max(1, a.calls // 4)
                t0 = time.thread_time()
                for _ in range(n):
                    d.dispatch(produce, "bench")
                out["produce acks=1"].append((time.thread_time() - t0) / n * 1e6)
                # the follower: build in its session, encode, decode, append (the batch re-based per call)
                with tempfile.TemporaryDirectory(prefix="bench-follower-log-") as ftmp:
                    plog = PartitionLog.open(Path(ftmp) / "t-0", LogConfig(), SystemClock(), recover=False)
                    handler = FetchSessionHandler()
                    t0 = time.thread_time()
                    for _ in range(a.calls):
                        leo = plog.log_end_offset
                        sid, ep, listed = handler.build([("t", 0, 1, leo, 0)])
                        enc.frame(listed, sid, ep)
                        struct.pack_into(">q", response, records_at, leo)
                        _, _, parts = decode_fetch_response_session(response)
                        handler.handle_response(0, 77)
                        rec = parts[0].records
                        assert rec is not None
                        plog.append(rec, leader_epoch=1, now_ms=0, origin=AppendOrigin.REPLICATION)
                    out["follower"].append((time.thread_time() - t0) / a.calls * 1e6)
                    plog.close()
            return out

        results = asyncio.run(run())
    for name, xs in results.items():
        print(f"{name:20s} us/call {min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
