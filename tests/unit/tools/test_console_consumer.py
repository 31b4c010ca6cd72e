"""kafkad-console-consumer: DefaultMessageFormatter layout, batch decoding, options, and a fetch loop."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode, Request
from kafkad.storage.records import Compression, Record, SimpleRecord, TimestampType, build_batch
from kafkad.tools import console_consumer as cc
from kafkad.tools.client import ToolError
from tests.unit.tools.test_client_fake import FakeBroker

REC = Record(
    offset=7, timestamp=1700000000000, key=b"k", value=b"v", headers=(("h", b"1"), ("n", None)), sequence=-1
)


def fmt(**props: str) -> cc.MessageFormatter:
    return cc.MessageFormatter.from_properties(props)


def test_formatter_default_prints_value_only() -> None:
    assert fmt().format(REC, 0, TimestampType.CREATE_TIME) == b"v\n"


def test_formatter_all_fields_in_kafkas_order() -> None:
    f = fmt(**{"print.key": "true", "print.timestamp": "true", "print.headers": "true",
               "print.partition": "true", "print.offset": "true"})  # fmt: skip
    assert (
        f.format(REC, 3, TimestampType.CREATE_TIME)
        == b"CreateTime:1700000000000\tPartition:3\tOffset:7\th:1,n:null\tk\tv\n"
    )
    assert f.format(REC, 3, TimestampType.LOG_APPEND_TIME).startswith(b"LogAppendTime:1700000000000\t")


def test_formatter_separators_nulls_and_no_headers() -> None:
    f = fmt(**{"print.key": "true", "key.separator": ":", "print.headers": "true", "null.literal": "NIL"})
    r = Record(0, 0, None, None, (), -1)
    assert f.format(r, 0, TimestampType.CREATE_TIME) == b"NO_HEADERS:NIL:NIL\n"
    assert (
        fmt(**{"print.key": "true", "print.value": "false"}).format(REC, 0, TimestampType.CREATE_TIME) == b"k"
    )
    with pytest.raises(ToolError):
        fmt(**{"print.kye": "true"})


def _batch(base: int, values: list[bytes], compression: Compression = Compression.NONE) -> bytes:
    return build_batch([SimpleRecord(value=v, timestamp=1000 + i) for i, v in enumerate(values)],
                       base_offset=base, compression=compression)  # fmt: skip


def test_decode_records_skips_below_position_and_stops_at_a_partial_batch() -> None:
    data = _batch(0, [b"a", b"b", b"c"], Compression.LZ4) + _batch(3, [b"d"])
    records, pos = cc.decode_records(data + _batch(4, [b"e"])[:-3], 1)
    assert [(r.offset, r.value) for r, _ in records] == [(1, b"b"), (2, b"c"), (3, b"d")]
    assert pos == 4
    assert cc.decode_records(None, 9) == ([], 9)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--partition", "0", "--offset", "5", "--from-beginning"], "from-beginning and offset"),
        (["--offset", "5"], "partition is required"),
        (["--group", "g", "--partition", "0"], "group and partition"),
        (["--partition", "0", "--offset", "-4"], "non-negative"),
    ],
)
def test_start_position_checks(argv: list[str], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        cc.start_position(cc.build_parser().parse_args(["--topic", "t", *argv]))


def test_start_positions() -> None:
    parse = cc.build_parser().parse_args
    assert cc.start_position(parse(["--topic", "t"])) == cc.StartPosition(None, -1, None)
    assert cc.start_position(parse(["--topic", "t", "--from-beginning"])) == cc.StartPosition(None, -2, None)
    assert cc.start_position(
        parse(["--topic", "t", "--partition", "1", "--offset", "9"])
    ) == cc.StartPosition((1,), None, 9)


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    logs = {
        0: _batch(0, [b"p0-a", b"p0-b"]),
        1: _batch(0, [b"p1-a"], Compression.GZIP) + _batch(1, [b"p1-b"]),
    }
    ends = {0: 2, 1: 2}
    with FakeBroker() as b:
        b.handlers[ApiKey.METADATA] = lambda req: b.metadata_body({"t": 2})

        def list_offsets(req: Request) -> dict[str, Any]:
            ps = req.body["topics"][0]["partitions"]
            return {"topics": [{"name": "t", "partitions": [
                {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
                 "offset": 0 if p["timestamp"] == -2 else ends[p["partition_index"]]} for p in ps]}]}  # fmt: skip

        def fetch(req: Request) -> dict[str, Any]:
            out = []
            for p in req.body["topics"][0]["partitions"]:
                idx, off = p["partition"], p["fetch_offset"]
                if off > ends[idx]:
                    out.append({"partition_index": idx, "error_code": ErrorCode.OFFSET_OUT_OF_RANGE,
                                "high_watermark": -1, "records": None})  # fmt: skip
                else:
                    data = logs[idx] if off < ends[idx] else b""
                    out.append(
                        {
                            "partition_index": idx,
                            "error_code": 0,
                            "high_watermark": ends[idx],
                            "records": data,
                        }
                    )
            return {"responses": [{"topic": "t", "partitions": out}]}

        b.handlers[ApiKey.LIST_OFFSETS] = list_offsets
        b.handlers[ApiKey.FETCH] = fetch
        yield b


def _consume(broker: FakeBroker, *argv: str) -> tuple[bytes, int]:
    args = cc.build_parser().parse_args(["--bootstrap-server", broker.bootstrap, "--topic", "t", *argv])
    out = io.BytesIO()
    printed = [0]
    cc.consume(args, out, printed)
    return out.getvalue(), printed[0]


def test_from_beginning_reads_every_partition(broker: FakeBroker) -> None:
    out, n = _consume(broker, "--from-beginning", "--max-messages", "4", "--property", "print.partition=true")
    assert n == 4
    assert sorted(out.splitlines()) == [b"Partition:0\tp0-a", b"Partition:0\tp0-b",
                                        b"Partition:1\tp1-a", b"Partition:1\tp1-b"]  # fmt: skip


def test_partition_and_offset(broker: FakeBroker) -> None:
    out, n = _consume(broker, "--partition", "1", "--offset", "1", "--max-messages", "1")
    assert (out, n) == (b"p1-b\n", 1)


def test_timeout_stops_an_idle_consumer(broker: FakeBroker, capsys: pytest.CaptureFixture[str]) -> None:
    out, n = _consume(broker, "--timeout-ms", "50")  # latest: nothing new arrives
    assert (out, n) == (b"", 0)
    assert "TimeoutException" in capsys.readouterr().err


def test_group_without_broker_support_is_a_clear_error(
    broker: FakeBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    del broker.api_ranges[ApiKey.JOIN_GROUP]
    rc = cc.main(["--bootstrap-server", broker.bootstrap, "--topic", "t", "--group", "g"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "does not support consumer groups (JoinGroup not advertised)" in err
    assert "Traceback" not in err


def test_rewind_moves_positions_back_to_the_first_unprinted_record(broker: FakeBroker) -> None:
    from kafkad.tools.client import KafkaClient

    with KafkaClient(broker.bootstrap) as client:
        consumer = cc.Consumer(client, "t")
        consumer.seek([0, 1], -2)
        records = consumer.poll(0)
        assert consumer.positions == {0: 2, 1: 2}
        consumer.rewind([x for x in records if x[1].offset >= 1])
        assert consumer.positions == {0: 1, 1: 1}
