"""Unit tests of the benchmark suite's own logic (run: .venv/bin/pytest -q tests/bench)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from kafkad.protocol import ApiKey, RequestHeader, decode_request, decode_response, encode_request
from tests.bench.profile import fold
from tests.bench.raw_client import make_batch, next_offset, produce_request
from tests.bench.sink import Sink, SinkProtocol, partitions_of
from tests.bench.stats import Row, Target, Verdict, figure, percentile, ratio


def test_ratio_is_taken_run_by_run() -> None:
    k = figure("k", "x", [10, 20, 30])
    b = figure("b", "x", [5, 40, 10])
    r = ratio("r", k, b)
    assert r.runs == (2.0, 0.5, 3.0)
    assert (r.min, r.median, r.max) == (0.5, 2.0, 3.0)


def test_percentile_nearest_rank() -> None:
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 99.9) == 100.0
    assert percentile([], 50) != percentile([], 50)  # nan


def test_row_verdict_uses_ratio_when_asked() -> None:
    k = figure("k", "x", [3.0, 3.0, 3.0])
    b = figure("b", "x", [1.0, 2.0, 3.0])
    row = Row("s", "l", k, b, "sink", ratio("", k, b), Target("<=", 1.25), target_on_ratio=True)
    assert row.verdict is Verdict.MISS  # median ratio 1.5
    assert Row("s", "l", k, target=Target(">=", 3.0)).verdict is Verdict.PASS


def test_next_offset_walks_batch_headers() -> None:
    one = bytearray(make_batch(10, 4))  # offsets 0..3
    two = bytearray(make_batch(10, 2))
    two[0:8] = (4).to_bytes(8, "big")  # base offset 4: offsets 4..5
    blob = bytes(one + two)
    assert next_offset(blob, 0) == 6
    assert next_offset(blob[: len(one) + 20], 0) == 4  # a torn second batch is ignored
    assert next_offset(b"", 7) == 7


def test_sink_answers_metadata_and_counts_produce_offsets() -> None:
    fd, path = tempfile.mkstemp()
    try:
        sink = Sink(fd, "127.0.0.1", 9999)
        md = encode_request(RequestHeader(ApiKey.METADATA, 8, 1, "t"), {"topics": [{"name": "x_p3"}]})
        reply = sink.answer(decode_request(bytearray(md[4:])))
        assert reply is not None
        _, body = decode_response(ApiKey.METADATA, 8, reply[4:])
        assert [p["partition_index"] for p in body["topics"][0]["partitions"]] == [0, 1, 2]
        batch = make_batch(100, 5)
        for expect_base in (0, 5):
            req = produce_request("x_p3", 1, batch)
            reply = sink.answer(decode_request(bytearray(req[4:])))
            assert reply is not None
            _, body = decode_response(ApiKey.PRODUCE, 8, reply[4:])
            assert body["responses"][0]["partition_responses"][0]["base_offset"] == expect_base
        assert os.path.getsize(path) == 2 * len(batch)
        # A null topic list means all topics seen so far.
        md_all = encode_request(RequestHeader(ApiKey.METADATA, 8, 2, "t"), {"topics": None})
        reply = sink.answer(decode_request(bytearray(md_all[4:])))
        assert reply is not None
        assert [t["name"] for t in decode_response(ApiKey.METADATA, 8, reply[4:])[1]["topics"]] == ["x_p3"]
    finally:
        os.close(fd)
        os.unlink(path)


@pytest.mark.parametrize(("name", "count"), [("bench", 1), ("parts_p1000", 1000), ("a_p7b", 1)])
def test_partitions_of(name: str, count: int) -> None:
    assert partitions_of(name) == count


def test_fold_self_and_total_shares() -> None:
    raw = "main (m.py:1);f (a.py:10);g (a.py:20) 3\nmain (m.py:1);f (a.py:11) 1\n"
    out = fold(raw, top=5)
    assert out.startswith("4 samples")
    self_part, total_part = out.split("== top 5 by total")
    assert "75.00%  g (a.py)" in self_part
    assert "25.00%  f (a.py)" in self_part
    assert "100.00%  f (a.py)" in total_part


def test_sink_protocol_reassembles_frames_bigger_than_its_buffer() -> None:
    fd, path = tempfile.mkstemp()
    try:
        proto = SinkProtocol(Sink(fd, "127.0.0.1", 9999))
        written: list[bytes] = []
        proto.transport = _FakeTransport(written)  # type: ignore[assignment]
        big = make_batch(1000, 600)  # ~600 KiB, several times the initial receive buffer
        stream = produce_request("t", 0, big) + produce_request("t", 0, make_batch(10, 1))
        pos = 0
        while pos < len(stream):
            buf = proto.get_buffer(-1)
            n = min(len(buf), 70000, len(stream) - pos)
            buf[:n] = stream[pos : pos + n]
            proto.buffer_updated(n)
            pos += n
        out = b"".join(written)
        frames = 0
        while out:
            size = int.from_bytes(out[:4], "big")
            out = out[4 + size :]
            frames += 1
        assert frames == 2  # both requests answered
        assert os.path.getsize(path) == len(big) + len(make_batch(10, 1))
    finally:
        os.close(fd)
        os.unlink(path)


class _FakeTransport:
    def __init__(self, out: list[bytes]) -> None:
        self.out = out

    def write(self, data: bytes) -> None:
        self.out.append(data)


def test_newest_segments_holding_enough_bytes(tmp_path: Path) -> None:
    from tests.bench.scenario_replication import _newest

    files = []
    for i, size in enumerate([100, 50, 30, 5]):  # oldest first, the active segment last
        f = tmp_path / f"{i:020d}.log"
        f.write_bytes(b"x" * size)
        files.append(f)
    assert _newest(files, 5) == files[3:]
    assert _newest(files, 6) == files[2:]  # a just-rolled active segment is not enough alone
    assert _newest(files, 85) == files[1:]
    assert _newest(files, 10_000) == files  # all there is
    assert _newest(files, 0) == []


def test_page_cache_probe_reads_a_cost_per_page_and_leaves_nothing(tmp_path: Path) -> None:
    from tests.bench.page_cache_probe import append_us_per_page

    cost = append_us_per_page(tmp_path, mib=1)
    assert 0 < cost < 10_000  # microseconds per 4 KiB page: positive, and not a unit mistake (ns, s)
    assert list(tmp_path.iterdir()) == []


def test_replication_floor_reaches_a_rate_with_no_broker_work() -> None:
    """The floor tool's four processes exchange requests and fetches (a broken exchange reads 0 req/s or hangs)."""
    from tests.bench.replication_floor import one_round

    r = one_round(-1, 1, 2, 4096, 0.3)
    assert r.rate > 100 and r.per_fetch > 0 and r.follower_us > 0
