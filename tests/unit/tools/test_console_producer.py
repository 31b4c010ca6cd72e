"""kafkad-console-producer: line parsing, acks, and the Produce requests it sends (FakeBroker)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafkad.protocol import ApiKey, Request
from kafkad.storage.records import Compression, decode_batch, read_header
from kafkad.tools import console_producer as cp
from kafkad.tools.client import ToolError
from kafkad.tools.partitioner import murmur2, to_positive
from tests.unit.tools.test_client_fake import FakeBroker


def test_line_format_key_and_headers() -> None:
    fmt = cp.LineFormat.from_properties(
        {"parse.key": "true", "key.separator": ":", "parse.headers": "true", "null.marker": "NULL"}
    )
    r = fmt.parse("h1:v1,h2\tk:v:w", 1)
    assert (r.key, r.value) == (b"k", b"v:w")
    assert r.headers == (("h1", b"v1"), ("h2", None))
    r = fmt.parse("\tNULL:x", 2)
    assert (r.key, r.value, r.headers) == (None, b"x", ())


def test_line_without_separator_is_an_error_unless_ignored() -> None:
    fmt = cp.LineFormat.from_properties({"parse.key": "true"})
    with pytest.raises(ToolError, match="No key separator found on line number 3: 'plain'"):
        fmt.parse("plain", 3)
    lenient = cp.LineFormat.from_properties({"parse.key": "true", "ignore.error": "true"})
    r = lenient.parse("plain", 3)
    assert (r.key, r.value) == (None, b"plain")


def test_default_format_takes_the_whole_line_as_value_and_escapes_separators() -> None:
    assert cp.LineFormat.from_properties({}).parse("a\tb", 1).key is None
    fmt = cp.LineFormat.from_properties({"parse.key": "true", "key.separator": "\\t"})
    assert fmt.parse("a\tb", 1).key == b"a"
    with pytest.raises(ToolError, match="Unknown --property"):
        cp.LineFormat.from_properties({"parse.kye": "true"})


def test_acks_and_bare_compression_flag() -> None:
    assert [cp.parse_acks(a) for a in ("all", "-1", "0", "1")] == [-1, -1, 0, 1]
    with pytest.raises(ToolError):
        cp.parse_acks("2")
    parser = cp.build_parser()
    assert parser.parse_args(["--topic", "t", "--compression-codec"]).compression_codec == "gzip"
    assert parser.parse_args(["--topic", "t", "--compression-codec", "zstd"]).compression_codec == "zstd"
    assert parser.parse_args(["--topic", "t"]).compression_codec == "none"


def test_line_reader_splits_lines_and_times_out() -> None:
    r, w = os.pipe()
    reader = cp.LineReader(r)
    os.write(w, b"one\r\ntwo\nthr")
    assert reader.readline(None) == b"one"
    assert reader.readline(None) == b"two"
    assert reader.readline(0.0) is None and not reader.eof
    os.write(w, b"ee")
    os.close(w)
    assert reader.readline(None) == b"three"
    assert reader.readline(None) is None and reader.eof
    os.close(r)


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker() as b:
        b.handlers[ApiKey.METADATA] = lambda req: b.metadata_body({"t": 3})

        def produce(req: Request) -> dict[str, Any] | None:
            if req.body["acks"] == 0:
                return None
            return {"responses": [{"name": t["name"], "partition_responses": [
                {"index": p["index"], "error_code": 0, "base_offset": 0} for p in t["partition_data"]
            ]} for t in req.body["topic_data"]]}  # fmt: skip

        b.handlers[ApiKey.PRODUCE] = produce
        yield b


def _sent(broker: FakeBroker) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    out: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
    for req in broker.requests:
        if req.header.api_key != ApiKey.PRODUCE:
            continue
        for t in req.body["topic_data"]:
            for p in t["partition_data"]:
                batch = decode_batch(bytes(p["records"]))
                out.setdefault(p["index"], []).extend((r.key, r.value) for r in batch.records)
    return out


def _run(broker: FakeBroker, lines: bytes, *extra: str, monkeypatch: pytest.MonkeyPatch) -> int:
    r, w = os.pipe()
    os.write(w, lines)
    os.close(w)
    monkeypatch.setattr("sys.stdin", os.fdopen(r, "r"))
    return cp.main(["--bootstrap-server", broker.bootstrap, "--topic", "t", *extra])


def test_keys_go_to_the_murmur2_partition(broker: FakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [b"a", b"b", b"c", b"21", b"foobar"]
    lines = b"".join(k + b":v-" + k + b"\n" for k in keys)
    assert _run(broker, lines, "--property", "parse.key=true", "--property", "key.separator=:",
                "--compression-codec", monkeypatch=monkeypatch) == 0  # fmt: skip
    sent = _sent(broker)
    for k in keys:
        assert (k, b"v-" + k) in sent[to_positive(murmur2(k)) % 3]
    assert sum(len(v) for v in sent.values()) == len(keys)
    req = next(r for r in broker.requests if r.header.api_key == ApiKey.PRODUCE)
    assert req.body["acks"] == -1
    records = bytes(req.body["topic_data"][0]["partition_data"][0]["records"])
    assert read_header(records).compression is Compression.GZIP


def test_null_keys_round_robin_with_acks_0(broker: FakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(broker, b"x\ny\nz\nw\n", "--request-required-acks", "0", monkeypatch=monkeypatch) == 0
    # acks=0 gets no answer, so the tool may exit before the fake broker's thread has read every request.
    deadline = time.monotonic() + 60  # left as soon as all 4 arrived
    while sum(len(v) for v in _sent(broker).values()) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    sent = _sent(broker)
    assert sent == {0: [(None, b"x"), (None, b"w")], 1: [(None, b"y")], 2: [(None, b"z")]}


def test_bad_line_is_reported_without_traceback(
    broker: FakeBroker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = _run(broker, b"k:v\nnokey\n", "--property", "parse.key=true", "--property", "key.separator=:",
              monkeypatch=monkeypatch)  # fmt: skip
    assert rc == 1
    err = capsys.readouterr().err
    assert "No key separator found on line number 2" in err and "Traceback" not in err
    assert sum(len(v) for v in _sent(broker).values()) == 1  # the good line before it was still sent
