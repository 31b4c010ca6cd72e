"""kafkad-dump-log: print segment files the way Kafka's `kafka.tools.DumpLogSegments` does.

    kafkad-dump-log --files 00000000000000000000.log[,00000000000000000000.index,...]
                    [--print-data-log] [--deep-iteration] [--verify-index-only]
                    [--transaction-log-decoder]

- `.log`: "Starting offset: N", one line per batch ("baseOffset: ... isvalid: true"), and with
  --deep-iteration (implied by --print-data-log) one "| offset: ..." line per record; with
  --print-data-log the key and payload as UTF-8 text. Control batches print their marker.
  --transaction-log-decoder (implies --print-data-log) decodes `__transaction_state` records as Kafka's
  TransactionLog.formatRecordKeyAndValue does ("key: transaction_metadata::transactionalId=..."
  "payload: producerId:...,state=Ongoing,partitions=[...],...").
- `.index`: "offset: N position: P" per entry (8 bytes: int32 relative offset, int32 position).
- `.timeindex`: "timestamp: T offset: O" per entry (12 bytes: int64 timestamp, int32 relative offset).
- `.txnindex`: one line per aborted transaction.
Index files are preallocated, so the first entry after the head whose offset is the base offset
(i.e. zeros) ends the listing. Each index entry is checked against the batch it points at in the
sibling .log; mismatches go to stderr as Kafka words them. --verify-index-only checks without printing
the entries. The files are mmapped, so large segments are not read into memory.

Exit status: 0 on success, 1 if a file could not be read or an index does not match its log.
"""

from __future__ import annotations

import argparse
import bisect
import mmap
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from kafkad.protocol.errors import KafkaError
from kafkad.storage.records import (
    BatchHeader,
    ControlRecord,
    TimestampType,
    decode_batch,
    iter_headers,
)
from kafkad.storage.records.records import is_crc_valid

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")
# A record's (key, value) -> the text printed after "key:" and "payload:" (None: not printed); Kafka's
# DumpLogSegments.MessageParser.
Decoder = Callable[[bytes | None, bytes | None], tuple[str | None, str | None]]
_TIMESTAMP_NAMES = {TimestampType.CREATE_TIME: "CreateTime", TimestampType.LOG_APPEND_TIME: "LogAppendTime"}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _text(blob: bytes) -> str:
    # Kafka's StringDecoder: UTF-8 with replacement characters.
    return blob.decode("utf-8", errors="replace")


def _text_decoder(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    return None if key is None else _text(key), None if value is None else _text(value)


def _transaction_log_decoder(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    from kafkad.protocol.transaction_log import format_record

    return format_record(key, value)


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    """The file's bytes, mmapped read-only (an empty file gives an empty view)."""
    with path.open("rb") as f:
        size = path.stat().st_size
        if size == 0:
            yield memoryview(b"")
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                yield view
            finally:
                view.release()


def _base_offset(path: Path) -> int:
    return int(path.name.split(".")[0])


def batch_line(header: BatchHeader, valid: bool) -> str:
    ts_name = _TIMESTAMP_NAMES[header.timestamp_type]
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
        f"count: {header.records_count} baseSequence: {header.base_sequence} "
        f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
        f"producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)} "
        f"position: {header.position} {ts_name}: {header.max_timestamp} size: {header.size} "
        f"magic: {header.magic} compresscodec: {_codec_name(header)} crc: {header.crc} "
        f"isvalid: {_bool(valid)}"
    )


def _codec_name(header: BatchHeader) -> str:
    try:
        return header.compression.name
    except KafkaError:
        return f"UNKNOWN({header.attributes & 0x7})"


class Dumper:
    """Dumps files to `out`, problems to `err`; `failed` tells whether anything did not check out."""

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        print_data: bool,
        deep: bool,
        verify_only: bool,
        decoder: Decoder | None = None,
    ) -> None:
        self.out = out
        self.err = err
        self.decoder = decoder or _text_decoder
        print_data = print_data or decoder is not None
        self.print_data = print_data
        self.deep = deep or print_data
        self.verify_only = verify_only
        self.failed = False

    def dump(self, path: Path) -> None:
        print(f"Dumping {path}", file=self.out)
        suffix = path.suffix
        try:
            if suffix == ".log":
                self.dump_log(path)
            elif suffix == ".index":
                self.dump_index(path)
            elif suffix == ".timeindex":
                self.dump_time_index(path)
            elif suffix == ".txnindex":
                self.dump_txn_index(path)
            else:
                print(f"Ignoring unknown file {path}", file=self.err)
        except (OSError, ValueError) as exc:
            print(f"Could not read {path}: {exc}", file=self.err)
            self.failed = True

    def dump_log(self, path: Path) -> None:
        print(f"Starting offset: {_base_offset(path)}", file=self.out)
        non_consecutive: list[tuple[int, int]] = []
        last_offset = -1
        with _mapped(path) as buf:
            valid_bytes = 0
            for header in iter_headers(buf):
                print(batch_line(header, is_crc_valid(buf, header)), file=self.out)
                if self.deep:
                    for offset in self._dump_records(buf, header):
                        if last_offset != -1 and offset != last_offset + 1:
                            non_consecutive.append((last_offset, offset))
                        last_offset = offset
                valid_bytes = header.position + header.size
            trailing = len(buf) - valid_bytes
        if trailing > 0:
            print(f"Found {trailing} invalid bytes at the end of {path.name}", file=self.out)
        if non_consecutive:
            print(f"Non-consecutive offsets in {path.resolve()}", file=self.err)
            for first, second in non_consecutive:
                print(f"  {first} is followed by {second}", file=self.err)

    def _dump_records(self, buf: memoryview, header: BatchHeader) -> Iterator[int]:
        try:
            batch = decode_batch(buf, header.position)
        except KafkaError as exc:
            print(f"Could not decode batch at position {header.position}: {exc}", file=self.err)
            return
        ts_name = _TIMESTAMP_NAMES[header.timestamp_type]
        for record in batch.records:
            parts = [
                f"| offset: {record.offset} isValid: true crc: null",
                f"keySize: {-1 if record.key is None else len(record.key)}",
                f"valueSize: {-1 if record.value is None else len(record.value)}",
                f"{ts_name}: {record.timestamp} baseOffset: {header.base_offset}",
                f"lastOffset: {header.last_offset} baseSequence: {header.base_sequence}",
                f"lastSequence: {header.last_sequence} producerEpoch: {header.producer_epoch}",
                f"partitionLeaderEpoch: {header.partition_leader_epoch} batchSize: {header.size}",
                f"magic: {header.magic} compressType: {_codec_name(header)}",
                f"position: {header.position} sequence: {record.sequence}",
                "headerKeys: [" + ",".join(key for key, _ in record.headers) + "]",
            ]
            if header.is_control:
                try:
                    marker = ControlRecord.from_record(record)
                    parts.append(
                        f"endTxnMarker: {marker.type.name} coordinatorEpoch: {marker.coordinator_epoch}"
                    )
                except KafkaError as exc:
                    parts.append(f"controlType: unknown ({exc.message})")
            elif self.print_data:
                try:
                    key, payload = self.decoder(record.key, record.value)
                except KafkaError as exc:
                    key, payload = None, f"undecodable ({exc.message})"
                if key is not None:
                    parts.append(f"key: {key}")
                if payload is not None:
                    parts.append(f"payload: {payload}")
            print(" ".join(parts), file=self.out)
            yield record.offset

    def _log_headers(self, index_path: Path) -> dict[int, BatchHeader] | None:
        """Batches of the sibling .log by position, or None if there is no such file."""
        log_path = index_path.with_suffix(".log")
        if not log_path.exists():
            print(f"No log file {log_path} to verify {index_path.name} against", file=self.err)
            return None
        with _mapped(log_path) as buf:
            return {h.position: h for h in iter_headers(buf)}

    def dump_index(self, path: Path) -> None:
        base = _base_offset(path)
        batches = self._log_headers(path)
        mismatches: list[tuple[int, int]] = []
        with _mapped(path) as buf:
            count = len(buf) // _OFFSET_ENTRY.size
            if count == 0:
                print(f"{path} is empty.", file=self.out)
                return
            for i in range(count):
                relative, position = _OFFSET_ENTRY.unpack_from(buf, i * _OFFSET_ENTRY.size)
                if relative == 0 and i > 0:
                    break  # preallocated zeros
                offset = base + relative
                if batches is not None:
                    batch = batches.get(position)
                    log_offset = batch.last_offset if batch is not None else -1
                    if log_offset != offset:
                        mismatches.append((offset, log_offset))
                if not self.verify_only:
                    print(f"offset: {offset} position: {position}", file=self.out)
        if mismatches:
            self.failed = True
            print(f"Mismatches in :{path.resolve()}", file=self.err)
            for index_offset, log_offset in mismatches:
                print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=self.err)

    def dump_time_index(self, path: Path) -> None:
        base = _base_offset(path)
        by_position = self._log_headers(path)
        batches = sorted(by_position.values(), key=lambda h: h.position) if by_position else []
        last_offsets = [b.last_offset for b in batches]
        not_found: list[tuple[int, int]] = []
        mismatches: list[tuple[int, int]] = []
        out_of_order: list[tuple[int, int]] = []
        previous = -1
        with _mapped(path) as buf:
            for i in range(len(buf) // _TIME_ENTRY.size):
                timestamp, relative = _TIME_ENTRY.unpack_from(buf, i * _TIME_ENTRY.size)
                if relative == 0 and i > 0:
                    break  # preallocated zeros
                offset = base + relative
                if by_position is not None:
                    # First batch whose last offset reaches the entry (offsets increase in a log).
                    at = bisect.bisect_left(last_offsets, offset)
                    batch = batches[at] if at < len(batches) else None
                    if batch is None or batch.last_offset != offset:
                        not_found.append((offset, -1 if batch is None else batch.last_offset))
                    else:
                        if batch.max_timestamp != timestamp:
                            mismatches.append((timestamp, batch.max_timestamp))
                        if previous >= timestamp:
                            out_of_order.append((timestamp, previous))
                if not self.verify_only:
                    print(f"timestamp: {timestamp} offset: {offset}", file=self.out)
                previous = timestamp
        where = path.resolve()
        if mismatches:
            print(f"Found timestamp mismatch in :{where}", file=self.err)
            for index_ts, log_ts in mismatches:
                print(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}", file=self.err)
        if out_of_order:
            print(f"Found out of order timestamp in :{where}", file=self.err)
            for index_ts, prev_ts in out_of_order:
                print(
                    f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}",
                    file=self.err,
                )
        if not_found:
            print("The following indexed offsets are not found in the log.", file=self.err)
            for index_offset, log_offset in not_found:
                print(f"Indexed offset: {index_offset}, found log offset: {log_offset}", file=self.err)
        if mismatches or out_of_order or not_found:
            self.failed = True

    def dump_txn_index(self, path: Path) -> None:
        with _mapped(path) as buf:
            for i in range(len(buf) // _TXN_ENTRY.size):
                version, pid, first, last, lso = _TXN_ENTRY.unpack_from(buf, i * _TXN_ENTRY.size)
                print(
                    f"version: {version} producerId: {pid} firstOffset: {first} "
                    f"lastOffset: {last} lastStableOffset: {lso}",
                    file=self.out,
                )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkad-dump-log",
        description="Parse segment files (.log, .index, .timeindex, .txnindex) and dump them.",
    )
    parser.add_argument("--files", required=True, help="comma-separated list of files to dump (REQUIRED)")
    parser.add_argument("--print-data-log", action="store_true", help="print record keys and payloads")
    parser.add_argument(
        "--deep-iteration", action="store_true", help="print one line per record, not per batch"
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index entries against the log without printing them",
    )
    parser.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="decode records of __transaction_state (implies --print-data-log)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    dumper = Dumper(
        sys.stdout,
        sys.stderr,
        print_data=args.print_data_log,
        deep=args.deep_iteration,
        verify_only=args.verify_index_only,
        decoder=_transaction_log_decoder if args.transaction_log_decoder else None,
    )
    for name in args.files.split(","):
        if name:
            dumper.dump(Path(name))
    return 1 if dumper.failed else 0


if __name__ == "__main__":
    sys.exit(main())
