"""kafkad-console-consumer: Kafka's kafka-console-consumer.sh over the wire.

Without --group it assigns itself the topic's partitions (or --partition), finds the start offsets with
ListOffsets (--from-beginning/earliest, latest by default, or --offset N), and loops on Fetch to each
partition's leader, decoding batches with kafkad.storage.records.decode_batch and printing every record
with DefaultMessageFormatter's layout (print.timestamp, print.partition, print.offset, print.headers,
print.key, print.value, key.separator, line.separator, headers.separator, null.literal). With --group it
joins the group (group_member.GroupMember) and starts from the committed offsets.

It stops after --max-messages records, or when no record arrived for --timeout-ms, printing
"Processed a total of N messages" on stderr like Kafka.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.storage.records import Record, TimestampType, decode_batch, read_header
from kafkad.storage.records.batch import BATCH_OVERHEAD
from kafkad.tools._cli import (
    bootstrap_of,
    parse_args,
    parse_properties,
    prop_bool,
    run,
    security_of,
    tool_parser,
    unescape,
)
from kafkad.tools.client import KafkaApiError, KafkaClient, ToolError, check
from kafkad.tools.get_offsets import EARLIEST, LATEST, list_offsets

_RETRY_METADATA = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
     ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class MessageFormatter:
    """Kafka's DefaultMessageFormatter: which fields to print and the separators between them."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> MessageFormatter:
        def sep(name: str, default: str) -> bytes:
            return unescape(props.get(name, default)).encode()

        known = {
            "print.timestamp", "print.partition", "print.offset", "print.headers", "print.key", "print.value",
            "key.separator", "line.separator", "headers.separator", "headers.key.separator", "null.literal",
            "key.deserializer", "value.deserializer", "headers.deserializer",
        }  # fmt: skip
        unknown = sorted(set(props) - known)
        if unknown:
            raise ToolError(f"Unknown --property {', '.join(unknown)}")
        return cls(
            print_timestamp=prop_bool(props, "print.timestamp"),
            print_partition=prop_bool(props, "print.partition"),
            print_offset=prop_bool(props, "print.offset"),
            print_headers=prop_bool(props, "print.headers"),
            print_key=prop_bool(props, "print.key"),
            print_value=prop_bool(props, "print.value", True),
            key_separator=sep("key.separator", "\t"),
            line_separator=sep("line.separator", "\n"),
            headers_separator=sep("headers.separator", ","),
            headers_key_separator=sep("headers.key.separator", ":"),
            null_literal=sep("null.literal", "null"),
        )

    def format(self, record: Record, partition: int, timestamp_type: TimestampType) -> bytes:
        """One record as DefaultMessageFormatter.writeTo prints it."""
        fields: list[bytes] = []
        if self.print_timestamp:
            kind = "CreateTime" if timestamp_type is TimestampType.CREATE_TIME else "LogAppendTime"
            fields.append(f"{kind}:{record.timestamp}".encode())
        if self.print_partition:
            fields.append(f"Partition:{partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{record.offset}".encode())
        if self.print_headers:
            if record.headers:
                fields.append(
                    self.headers_separator.join(
                        name.encode() + self.headers_key_separator + self._blob(value)
                        for name, value in record.headers
                    )
                )
            else:
                fields.append(b"NO_HEADERS")
        if self.print_key:
            fields.append(self._blob(record.key))
        if self.print_value:
            fields.append(self._blob(record.value))
        out = self.key_separator.join(fields)
        # Kafka ends the line only after the value; without print.value the next record follows directly.
        return out + self.line_separator if self.print_value else out

    def _blob(self, value: bytes | None) -> bytes:
        return self.null_literal if value is None else value


def decode_records(data: Any, position: int) -> tuple[list[tuple[Record, TimestampType]], int]:
    """Records at or past `position` of the complete batches in a fetched records blob, and the next position.

    A fetch may end with a partial batch (the broker sends whole batches up to the size limit, but the last
    one may be cut); decoding stops there. Control batches (transaction markers) only move the position.
    """
    if not data:
        return [], position
    view = memoryview(data)
    out: list[tuple[Record, TimestampType]] = []
    pos = 0
    while len(view) - pos >= BATCH_OVERHEAD:
        header = read_header(view, pos)
        if header.size > len(view) - pos:
            break
        if header.last_offset >= position:
            if not header.is_control:
                batch = decode_batch(view, pos)
                out.extend((r, header.timestamp_type) for r in batch.records if r.offset >= position)
            position = header.last_offset + 1
        pos += header.size
    return out, position


class Consumer:
    """Fetches a set of partitions of one topic from their leaders (no fetch sessions: full fetches)."""

    def __init__(self, client: KafkaClient, topic: str, *, isolation_level: int = 0,
                 reset: int = LATEST, max_wait_ms: int = 500) -> None:  # fmt: skip
        self.client = client
        self.topic = topic
        self.isolation_level = isolation_level
        self.reset = reset
        self.max_wait_ms = max_wait_ms
        self.positions: dict[int, int] = {}
        self.leaders: dict[int, int] = {}
        self.refresh()

    def refresh(self) -> None:
        info = self.client.metadata([self.topic]).topic(self.topic)
        self.leaders = {p.partition: p.leader for p in info.partitions}

    def seek(self, partitions: Sequence[int], timestamp: int) -> None:
        """Set positions from ListOffsets (EARLIEST / LATEST / a timestamp)."""
        for p in partitions:
            if p not in self.leaders:
                raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{self.topic}-{p}")
        results = list_offsets(self.client, self.topic, partitions, timestamp, self.leaders)
        for p in partitions:
            r = results[p]
            check(r.error_code, f"ListOffsets {self.topic}-{p}")
            self.positions[p] = r.offset

    def rewind(self, unconsumed: Sequence[tuple[int, Record, TimestampType]]) -> None:
        """Move positions back to the first of these records per partition (they were fetched, not used)."""
        for p, record, _ in unconsumed:
            self.positions[p] = min(self.positions[p], record.offset)

    def poll(self, max_wait_ms: int | None = None) -> list[tuple[int, Record, TimestampType]]:
        """One round of fetches; the new records in offset order per partition."""
        by_leader: dict[int, list[int]] = {}
        for p in sorted(self.positions):
            by_leader.setdefault(self.leaders.get(p, -1), []).append(p)
        out: list[tuple[int, Record, TimestampType]] = []
        stale = False
        for leader, parts in by_leader.items():
            if leader < 0:
                stale = True
                continue
            body = {
                "replica_id": -1,
                "max_wait_ms": self.max_wait_ms if max_wait_ms is None else max_wait_ms,
                "min_bytes": 1,
                "max_bytes": 52428800,
                "isolation_level": self.isolation_level,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": self.topic,
                        "partitions": [
                            {
                                "partition": p,
                                "current_leader_epoch": -1,
                                "fetch_offset": self.positions[p],
                                "log_start_offset": -1,
                                "partition_max_bytes": 1048576,
                            }
                            for p in parts
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            resp = self.client.node(leader).send(ApiKey.FETCH, body)
            check(resp.get("error_code", 0), "Fetch")
            for t in resp["responses"]:
                for pr in t["partitions"]:
                    p, code = pr["partition_index"], pr["error_code"]
                    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        self.seek([p], self.reset)
                    elif code in _RETRY_METADATA:
                        stale = True
                    else:
                        check(code, f"Fetch {self.topic}-{p}")
                        records, self.positions[p] = decode_records(pr["records"], self.positions[p])
                        out.extend((p, r, ts) for r, ts in records)
        if stale:
            time.sleep(0.1)  # retry.backoff.ms: give the leader election a moment
            self.refresh()
        return out


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser("kafkad-console-consumer", "Consume records from a topic and print them to stdout.")
    p.add_argument("--topic", help="The topic to consume on.")
    p.add_argument(
        "--partition", type=int, help="Consume only this partition (latest unless --from-beginning)."
    )
    p.add_argument(
        "--offset", default="latest", help="earliest, latest or a non-negative offset (with --partition)."
    )
    p.add_argument("--from-beginning", action="store_true", help="Start with the earliest message present.")
    p.add_argument("--max-messages", type=int, help="Exit after this many messages.")
    p.add_argument("--timeout-ms", type=int, help="Exit if no message arrived for this long.")
    p.add_argument(
        "--property", action="append", default=[], metavar="PROP=VALUE", help="Formatter property."
    )
    p.add_argument("--group", help="The consumer group id to join (needs the broker's group APIs).")
    p.add_argument(
        "--isolation-level", default="read_uncommitted", choices=["read_uncommitted", "read_committed"]
    )
    p.add_argument("--consumer-property", action="append", default=[], help=argparse.SUPPRESS)
    return p


@dataclass(frozen=True, slots=True)
class StartPosition:
    partitions: tuple[int, ...] | None  # None: all partitions of the topic
    timestamp: int | None  # EARLIEST / LATEST for a ListOffsets lookup; None when `offset` is set
    offset: int | None


def start_position(args: argparse.Namespace) -> StartPosition:
    """ConsoleConsumer's option checks and the starting point they imply."""
    if not args.topic:
        raise ToolError("Exactly one of whitelist/topic is required.")
    offset_given = args.offset != "latest"
    if args.group and args.partition is not None:
        raise ToolError("Options group and partition cannot be specified together.")
    if args.group and offset_given:
        raise ToolError("Options group and offset cannot be specified together.")
    if offset_given and args.partition is None:
        raise ToolError("The partition is required when offset is specified.")
    if offset_given and args.from_beginning:
        raise ToolError("Options from-beginning and offset cannot be specified together.")
    if args.max_messages is not None and args.max_messages < 0:
        raise ToolError("--max-messages must be >= 0")
    parts = None if args.partition is None else (args.partition,)
    text = str(args.offset).strip().lower()
    if args.from_beginning or text == "earliest":
        return StartPosition(parts, EARLIEST, None)
    if text == "latest":
        return StartPosition(parts, LATEST, None)
    try:
        offset = int(text)
    except ValueError:
        offset = -1
    if offset < 0:
        raise ToolError(f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                        "'earliest', 'latest', or a non-negative long.")  # fmt: skip
    return StartPosition(parts, None, offset)


def consume(args: argparse.Namespace, out: IO[bytes], printed: list[int]) -> None:
    """The consume loop; printed[0] counts the records written (kept up to date for Ctrl-C)."""
    fmt = MessageFormatter.from_properties(parse_properties(args.property))
    start = start_position(args)
    isolation = 1 if args.isolation_level == "read_committed" else 0
    limit = args.max_messages
    with KafkaClient(bootstrap_of(args), client_id=args.client_id, security=security_of(args)) as client:
        consumer = Consumer(client, args.topic, isolation_level=isolation,
                            reset=EARLIEST if start.timestamp == EARLIEST else LATEST)  # fmt: skip
        member = None
        if args.group:
            from kafkad.tools.group_member import GroupMember

            member = GroupMember(client, args.group, args.topic)
            member.join(consumer)
        elif start.offset is not None:
            assert start.partitions is not None
            consumer.positions[start.partitions[0]] = start.offset
        else:
            parts = list(start.partitions) if start.partitions is not None else sorted(consumer.leaders)
            assert start.timestamp is not None
            consumer.seek(parts, start.timestamp)
        try:
            last_record = time.monotonic()
            while limit is None or printed[0] < limit:
                wait_ms = 500
                if args.timeout_ms is not None:
                    left = args.timeout_ms - (time.monotonic() - last_record) * 1000
                    if left <= 0:
                        print("[kafkad-console-consumer] ERROR Error processing message, terminating consumer "
                              "process: TimeoutException", file=sys.stderr)  # fmt: skip
                        break
                    wait_ms = max(1, min(wait_ms, int(left)))
                if member is not None:
                    member.tick(consumer)
                records = consumer.poll(wait_ms)
                if records:
                    last_record = time.monotonic()
                for i, (p, record, ts_type) in enumerate(records):
                    if limit is not None and printed[0] >= limit:
                        consumer.rewind(records[i:])  # a group commits only what was printed
                        break
                    out.write(fmt.format(record, p, ts_type))
                    printed[0] += 1
                out.flush()
        finally:
            if member is not None:
                member.close(consumer)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    printed = [0]

    def body() -> int:
        consume(args, sys.stdout.buffer, printed)
        return 0

    status = run(body, "ERROR")
    if status in (0, 130):
        print(f"Processed a total of {printed[0]} messages", file=sys.stderr)
        status = 0
    return status


if __name__ == "__main__":
    sys.exit(main())
