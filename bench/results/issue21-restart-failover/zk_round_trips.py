import os; os.makedirs("/tmp/rp", exist_ok=True)  # noqa: E702 - work dirs and logs go there
"""ZooKeeper round-trip costs through ZkClient: 1000 pipelined gets, 1000 fenced multis, multis of 100."""
import asyncio, os, sys, time
from pathlib import Path
sys.path.insert(0, os.getcwd())
from tests.cluster.zookeeper import ZooKeeperServer
from kafkad.zk.client import ZkClient, CheckOp, SetOp

N = 1000
async def main(connect):
    zk = ZkClient(connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    await zk.start()
    await zk.ensure_path("/b")
    await asyncio.gather(*(zk.create(f"/b/{i}", b'{"x":1}') for i in range(N)))
    await zk.create("/epoch", b"1")
    for rep in range(3):
        t = time.perf_counter(); got = await asyncio.gather(*(zk.get(f"/b/{i}") for i in range(N))); g = time.perf_counter() - t
        t = time.perf_counter()
        await asyncio.gather(*(zk.multi([CheckOp("/epoch", 0), SetOp(f"/b/{i}", b'{"x":2}', -1)]) for i in range(N)))
        m1 = time.perf_counter() - t
        t = time.perf_counter()
        await asyncio.gather(*(zk.multi([CheckOp("/epoch", 0), *[SetOp(f"/b/{i}", b'{"x":3,"leader":1,"isr":[1,2]}', -1) for i in range(j, j + 100)]]) for j in range(0, N, 100)))
        m100 = time.perf_counter() - t
        print(f"gets {g*1000:.0f} ms, single multis {m1*1000:.0f} ms, multis of 100 {m100*1000:.0f} ms", flush=True)
    await zk.close()

zk = ZooKeeperServer(Path("/tmp/rp/zkb"))
zk.start()
try:
    import uvloop
    uvloop.run(main(zk.connect_string))
finally:
    zk.stop()
