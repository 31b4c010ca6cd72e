"""kafkad-dump-log on segment files written here: Kafka's DumpLogSegments output, index checks."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkad.storage.records import (
    Compression,
    ControlRecordType,
    SimpleRecord,
    build_batch,
    build_control_batch,
)
from kafkad.tools.dump_log import main

BASE = 100
FIRST = build_batch(
    [
        SimpleRecord(b"k1", b"hello", (("h", b"x"), ("g", None)), 1000),
        SimpleRecord(None, b"w\xff", (), 1001),
    ],
    base_offset=BASE,
    partition_leader_epoch=0,
)


@pytest.fixture
def segment(tmp_path: Path) -> dict[str, Path]:
    first = FIRST
    second = build_batch(
        [SimpleRecord(None, b"zz", (), 1005)],
        base_offset=BASE + 2,
        compression=Compression.GZIP,
        producer_id=7,
        producer_epoch=1,
        base_sequence=3,
        partition_leader_epoch=1,
    )
    marker = build_control_batch(
        ControlRecordType.COMMIT,
        producer_id=7,
        producer_epoch=1,
        coordinator_epoch=2,
        timestamp=1006,
        base_offset=BASE + 3,
        partition_leader_epoch=1,
    )
    name = f"{BASE:020d}"
    log = tmp_path / f"{name}.log"
    log.write_bytes(first + second + marker)
    index = tmp_path / f"{name}.index"
    index.write_bytes(struct.pack(">iiii", 1, 0, 2, len(first)) + bytes(80))  # preallocated tail
    timeindex = tmp_path / f"{name}.timeindex"
    timeindex.write_bytes(struct.pack(">qiqi", 1001, 1, 1005, 2) + bytes(36))
    return {"log": log, "index": index, "timeindex": timeindex}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_log_batches_only(segment: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = _run(capsys, "--files", str(segment["log"]))
    assert code == 0 and err == ""
    assert lines[0] == f"Dumping {segment['log']}"
    assert lines[1] == "Starting offset: 100"
    assert lines[2] == (
        "baseOffset: 100 lastOffset: 101 count: 2 baseSequence: -1 lastSequence: -1 "
        "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false "
        f"isControl: false position: 0 CreateTime: 1001 size: {len(FIRST)} magic: 2 compresscodec: NONE "
        f"crc: {struct.unpack_from('>I', segment['log'].read_bytes(), 17)[0]} isvalid: true"
    )
    assert lines[3].startswith("baseOffset: 102 lastOffset: 102 count: 1 baseSequence: 3 ")
    assert "lastSequence: 3 producerId: 7 producerEpoch: 1 partitionLeaderEpoch: 1" in lines[3]
    assert f"position: {len(FIRST)} CreateTime: 1005" in lines[3] and "compresscodec: GZIP" in lines[3]
    assert "isTransactional: true isControl: true" in lines[4]
    assert len(lines) == 5  # no record lines without --deep-iteration / --print-data-log


def test_print_data_log(segment: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = _run(capsys, "--files", str(segment["log"]), "--print-data-log")
    assert code == 0
    records = [line for line in lines if line.startswith("| ")]
    assert records[0] == (
        "| offset: 100 isValid: true crc: null keySize: 2 valueSize: 5 CreateTime: 1000 "
        "baseOffset: 100 lastOffset: 101 baseSequence: -1 lastSequence: -1 producerEpoch: -1 "
        f"partitionLeaderEpoch: 0 batchSize: {len(FIRST)} magic: 2 compressType: NONE position: 0 "
        "sequence: -1 headerKeys: [h,g] key: k1 payload: hello"
    )
    assert records[1].endswith("headerKeys: [] payload: w\ufffd")
    assert "keySize: -1 valueSize: 2 CreateTime: 1005" in records[2]
    assert f"compressType: GZIP position: {len(FIRST)} sequence: 3 headerKeys: [] payload: zz" in records[2]
    assert records[3].endswith("headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 2")
    assert len(records) == 4


def test_deep_iteration_without_payloads(
    segment: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, lines, _ = _run(capsys, "--files", str(segment["log"]), "--deep-iteration")
    records = [line for line in lines if line.startswith("| ")]
    assert len(records) == 4
    assert not any("payload:" in line for line in records)


def test_corrupt_and_trailing_bytes(segment: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    data = bytearray(segment["log"].read_bytes())
    data[40] ^= 0x01  # inside the first batch's CRC'd header fields
    segment["log"].write_bytes(bytes(data) + b"\x00" * 7)
    _, lines, _ = _run(capsys, "--files", str(segment["log"]))
    assert lines[2].endswith("isvalid: false")
    assert lines[3].endswith("isvalid: true")
    assert lines[-1] == f"Found 7 invalid bytes at the end of {segment['log'].name}"


def test_index_and_timeindex(segment: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = _run(capsys, "--files", f"{segment['index']},{segment['timeindex']}")
    assert code == 0 and err == ""
    assert lines == [
        f"Dumping {segment['index']}",
        "offset: 101 position: 0",
        f"offset: 102 position: {len(FIRST)}",
        f"Dumping {segment['timeindex']}",
        "timestamp: 1001 offset: 101",
        "timestamp: 1005 offset: 102",
    ]


def test_verify_index_only_reports_mismatches(
    segment: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = _run(capsys, "--files", str(segment["index"]), "--verify-index-only")
    assert code == 0 and lines == [f"Dumping {segment['index']}"] and err == ""
    # An entry whose offset is not the last offset of the batch at its position.
    segment["index"].write_bytes(struct.pack(">iiii", 1, 0, 3, 0))
    code, lines, err = _run(capsys, "--files", str(segment["index"]), "--verify-index-only")
    assert code == 1
    assert lines == [f"Dumping {segment['index']}"]
    assert err.splitlines() == [
        f"Mismatches in :{segment['index'].resolve()}",
        "  Index offset: 103, log offset: 101",
    ]


def test_timeindex_problems_are_reported(
    segment: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    segment["timeindex"].write_bytes(struct.pack(">qiqiqi", 1001, 1, 999, 2, 1010, 9))
    code, _, err = _run(capsys, "--files", str(segment["timeindex"]))
    assert code == 1
    assert "  Index timestamp: 999, log timestamp: 1005" in err
    assert "  Index timestamp: 999, Previously indexed timestamp: 1001" in err
    assert "Indexed offset: 109, found log offset: -1" in err


def test_empty_index_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "00000000000000000000.index"
    empty.write_bytes(b"")
    missing = tmp_path / "00000000000000000005.log"
    code, lines, err = _run(capsys, "--files", f"{empty},{missing}")
    assert code == 1
    assert f"{empty} is empty." in lines
    assert f"Could not read {missing}" in err
