"""__transaction_state record formats, byte for byte as Kafka's TransactionLog writes them, and its
partitioning and dump-log line."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkad.coordinator.transaction.records import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    format_record,
    partition_for,
)
from kafkad.coordinator.transaction.state import TxnState, TxnTransit
from kafkad.storage.records import SimpleRecord, build_batch
from kafkad.tools.dump_log import main


def _transit(state: TxnState, partitions: frozenset[tuple[str, int]]) -> TxnTransit:
    return TxnTransit(7, -1, 3, -1, 60000, state, partitions, 1000, 2000)


def test_key_bytes() -> None:
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(b"\x00\x00\x00\x02tx") == "tx"
    assert decode_key(b"\x00\x05\x00\x02tx") is None  # an unknown key version


def test_value_bytes_ongoing() -> None:
    value = encode_value(_transit(TxnState.ONGOING, frozenset({("a", 1), ("a", 0)})))
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"a"
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 2000, 1000)
    )
    assert value == expected
    v = decode_value(value)
    assert (v.producer_id, v.producer_epoch, v.state, set(v.partitions)) == (
        7,
        3,
        TxnState.ONGOING,
        {("a", 0), ("a", 1)},
    )


def test_value_empty_has_null_partitions() -> None:
    value = encode_value(_transit(TxnState.EMPTY, frozenset()))
    assert value[struct.calcsize(">hqhib") :][:4] == b"\xff\xff\xff\xff"
    assert decode_value(value).partitions == frozenset()


def test_flexible_v1_value_decodes() -> None:
    # Version 1 (flexible): compact array/string lengths (+1), tagged fields after each struct.
    value = (
        struct.pack(">hqhib", 1, 7, 3, 60000, 4)
        + bytes([2])  # one topic
        + bytes([2])
        + b"a"
        + bytes([2])
        + struct.pack(">i", 5)
        + b"\x00"  # the topic's tags
        + struct.pack(">qq", 2000, 1000)
        + b"\x00"
    )
    v = decode_value(value)
    assert (v.state, v.partitions, v.txn_last_update_ms, v.txn_start_ms) == (
        TxnState.COMPLETE_COMMIT,
        frozenset({("a", 5)}),
        2000,
        1000,
    )


def test_partition_is_kafkas_hash() -> None:
    # "abc".hashCode() == 96354; Integer.MIN_VALUE's abs is 0 (Utils.abs)
    assert partition_for("abc", 50) == 96354 % 50
    assert partition_for("polygenelubricants", 50) == 0  # hashCode() == Integer.MIN_VALUE


def test_dump_log_line_is_kafkas() -> None:
    key = encode_key("tx")
    value = encode_value(_transit(TxnState.ONGOING, frozenset({("a", 0)})))
    assert format_record(key, value) == (
        "transaction_metadata::transactionalId=tx",
        "producerId:7,producerEpoch:3,state=Ongoing,partitions=[a-0],txnLastUpdateTimestamp=2000,txnTimeoutMs=60000",
    )
    assert format_record(key, None) == ("transaction_metadata::transactionalId=tx", "<DELETE>")


def test_dump_log_transaction_log_decoder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [
        SimpleRecord(
            encode_key("tx"), encode_value(_transit(TxnState.ONGOING, frozenset({("a", 0)}))), (), 5
        ),
        SimpleRecord(encode_key("tx"), None, (), 6),
    ]
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(build_batch(records))
    assert main(["--files", str(log), "--transaction-log-decoder"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| offset:")]
    assert lines[0].endswith(
        " key: transaction_metadata::transactionalId=tx payload: producerId:7,producerEpoch:3,state=Ongoing,"
        "partitions=[a-0],txnLastUpdateTimestamp=2000,txnTimeoutMs=60000"
    )
    assert lines[1].endswith(" key: transaction_metadata::transactionalId=tx payload: <DELETE>")
