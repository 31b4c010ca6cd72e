"""kafkad-console-producer: Kafka's kafka-console-producer.sh over the wire.

Reads stdin line by line (LineMessageReader's properties: parse.key, key.separator, parse.headers,
headers.delimiter, headers.separator, headers.key.separator, null.marker, ignore.error), picks a partition
per record (murmur2 of the key like Java's default partitioner, round robin for null keys), and collects one
v2 batch per partition. A batch is sent when it reaches --batch-size bytes, when no new line arrived for
--timeout ms (linger, so interactive typing is sent promptly), with --sync after every line, and at EOF.
Each send is one Produce request per leader broker; retriable errors refresh metadata and retry.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.storage.records import Compression, SimpleRecord, build_batch
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
from kafkad.tools.client import KafkaApiError, KafkaClient, ToolError, error_class_name
from kafkad.tools.partitioner import DefaultPartitioner

log = logging.getLogger(__name__)

CODECS = {c.name.lower(): c for c in Compression}


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How a line becomes a record (LineMessageReader's properties)."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: str | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineFormat:
        known = {
            "parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
            "headers.key.separator", "null.marker", "ignore.error",
        }  # fmt: skip
        unknown = sorted(set(props) - known)
        if unknown:
            raise ToolError(f"Unknown --property {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        fmt = cls(
            parse_key=prop_bool(props, "parse.key"),
            key_separator=unescape(props.get("key.separator", "\t")),
            parse_headers=prop_bool(props, "parse.headers"),
            headers_delimiter=unescape(props.get("headers.delimiter", "\t")),
            headers_separator=unescape(props.get("headers.separator", ",")),
            headers_key_separator=unescape(props.get("headers.key.separator", ":")),
            null_marker=props.get("null.marker") or None,
            ignore_error=prop_bool(props, "ignore.error"),
        )
        for name in ("key_separator", "headers_delimiter", "headers_separator", "headers_key_separator"):
            if not getattr(fmt, name):
                raise ToolError(f"{name.replace('_', '.')} must not be empty")
        return fmt

    def parse(self, line: str, line_number: int) -> SimpleRecord:
        """One input line (without its newline) -> a record; ToolError for a malformed line."""
        rest = line
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if self.parse_headers:
            head, sep, after = rest.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise ToolError(f"No headers delimiter found on line number {line_number}: '{line}'")
            else:
                rest = after
                headers = tuple(self._header(h) for h in head.split(self.headers_separator) if h)
        key: str | None = None
        if self.parse_key:
            k, sep, after = rest.partition(self.key_separator)
            if not sep:
                if not self.ignore_error:
                    raise ToolError(f"No key separator found on line number {line_number}: '{line}'")
            else:
                key, rest = k, after
        return SimpleRecord(
            key=self._bytes(key), value=self._bytes(rest), headers=headers, timestamp=int(time.time() * 1000)
        )

    def _header(self, text: str) -> tuple[str, bytes | None]:
        name, sep, value = text.partition(self.headers_key_separator)
        return name, self._bytes(value) if sep else None

    def _bytes(self, text: str | None) -> bytes | None:
        if text is None or (self.null_marker is not None and text == self.null_marker):
            return None
        return text.encode("utf-8")


class LineReader:
    """Lines from a file descriptor, with a timeout so a linger can expire while stdin is idle."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()
        self.eof = False

    def readline(self, timeout_s: float | None) -> bytes | None:
        """The next line without its newline; None on timeout or at EOF (check `eof`)."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return line[:-1] if line.endswith(b"\r") else line
            if self.eof:
                if self._buf:
                    line = bytes(self._buf)
                    self._buf.clear()
                    return line
                return None
            if timeout_s is not None:
                # poll(), not select(): select() refuses fds >= 1024 (FD_SETSIZE).
                poller = select.poll()
                poller.register(self._fd, select.POLLIN | select.POLLHUP)
                if not poller.poll(timeout_s * 1000):
                    return None
            chunk = os.read(self._fd, 65536)
            if not chunk:
                self.eof = True
            self._buf += chunk


@dataclass(slots=True)
class Pending:
    records: list[SimpleRecord] = field(default_factory=list)
    size: int = 0


def parse_acks(text: str) -> int:
    if text.strip().lower() == "all":
        return -1
    try:
        acks = int(text)
    except ValueError:
        raise ToolError(f"Invalid --request-required-acks '{text}': use all, -1, 0 or 1") from None
    if acks not in (-1, 0, 1):
        raise ToolError(f"Invalid --request-required-acks '{text}': use all, -1, 0 or 1")
    return acks


class Producer:
    """Batches records per partition and sends them to the partition leaders."""

    def __init__(self, client: KafkaClient, topic: str, *, acks: int, compression: Compression,
                 timeout_ms: int, retries: int) -> None:  # fmt: skip
        self.client = client
        self.topic = topic
        self.acks = acks
        self.compression = compression
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.partitioner = DefaultPartitioner()
        self.pending: dict[int, Pending] = {}
        self.failed = 0
        self.sent = 0
        self._leaders: dict[int, int] = {}
        self._refresh(first=True)

    def _refresh(self, first: bool = False) -> None:
        for attempt in range(10):
            md = self.client.metadata([self.topic], auto_create=True)
            info = md.topics.get(self.topic)
            if info is not None and info.error_code == ErrorCode.NONE and info.partitions:
                self._leaders = {p.partition: p.leader for p in info.partitions}
                if all(leader >= 0 for leader in self._leaders.values()):
                    return
            code = info.error_code if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if code not in (
                ErrorCode.NONE,
                ErrorCode.LEADER_NOT_AVAILABLE,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ):
                raise KafkaApiError(ErrorCode(code), f"Topic '{self.topic}'")
            time.sleep(0.1 * (attempt + 1))  # the broker may be creating the topic right now
        raise ToolError(f"Topic {self.topic} not present in metadata (or without leaders) after 10 attempts.")

    def add(self, record: SimpleRecord, batch_size: int) -> None:
        p = self.partitioner.partition(record.key, len(self._leaders))
        pend = self.pending.setdefault(p, Pending())
        pend.records.append(record)
        pend.size += len(record.key or b"") + len(record.value or b"") + 16
        if pend.size >= batch_size:
            self.flush([p])

    def flush(self, partitions: Sequence[int] | None = None) -> None:
        parts = [
            p for p in (partitions if partitions is not None else list(self.pending)) if p in self.pending
        ]
        batches = {p: self.pending.pop(p).records for p in parts}
        batches = {p: recs for p, recs in batches.items() if recs}
        for attempt in range(self.retries + 1):
            if not batches:
                return
            retry = self._send(batches, last_attempt=attempt == self.retries)
            batches = {p: batches[p] for p in retry}
            if batches:
                time.sleep(0.1)  # retry.backoff.ms
                self._refresh()

    def _send(self, batches: dict[int, list[SimpleRecord]], *, last_attempt: bool) -> list[int]:
        """One Produce request per leader; the partitions worth retrying."""
        by_leader: dict[int, list[int]] = {}
        for p in batches:
            by_leader.setdefault(self._leaders[p], []).append(p)
        retry: list[int] = []
        for leader, parts in by_leader.items():
            body = {
                "transactional_id": None,
                "acks": self.acks,
                "timeout_ms": self.timeout_ms,
                "topic_data": [
                    {
                        "name": self.topic,
                        "partition_data": [
                            {"index": p, "records": build_batch(batches[p], compression=self.compression)}
                            for p in parts
                        ],
                    }
                ],
            }
            resp = self.client.node(leader).send(ApiKey.PRODUCE, body, expect_response=self.acks != 0)
            if self.acks == 0:
                self.sent += sum(len(batches[p]) for p in parts)
                continue
            for t in resp["responses"]:
                for pr in t["partition_responses"]:
                    p, code = pr["index"], ErrorCode(pr["error_code"])
                    n = len(batches.get(p, ()))
                    if code == ErrorCode.NONE:
                        self.sent += n
                    elif code.retriable and not last_attempt:
                        retry.append(p)
                    else:
                        self.failed += n
                        detail = pr.get("error_message")
                        err = KafkaApiError(code, "", detail)
                        print(
                            f"ERROR Error when sending message to topic {self.topic} partition {p} "
                            f"({n} records) with error: {error_class_name(code)}: {err.message.split(': ', 1)[-1]}",
                            file=sys.stderr,
                        )
        return retry


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser("kafkad-console-producer", "Read lines from stdin and produce them to a topic.")
    p.add_argument("--topic", required=True, help="The topic to produce messages to.")
    p.add_argument(
        "--property", action="append", default=[], metavar="PROP=VALUE", help="Line reader property."
    )
    p.add_argument(
        "--compression-codec", nargs="?", const="gzip", default="none", choices=sorted(CODECS),
        help="none, gzip, snappy, lz4 or zstd; given without a value: gzip.",
    )  # fmt: skip
    p.add_argument("--request-required-acks", default="-1", help="all/-1, 0 or 1 (default -1).")
    p.add_argument("--request-timeout-ms", type=int, default=1500, help="Produce timeout_ms (default 1500).")
    p.add_argument("--batch-size", type=int, default=16384, help="Bytes per partition batch (default 16384).")
    p.add_argument("--timeout", type=int, default=1000, help="Linger in ms before an idle batch is sent.")
    p.add_argument("--message-send-max-retries", type=int, default=3, help="Retries of retriable errors.")
    p.add_argument("--sync", action="store_true", help="Send every line as soon as it is read.")
    return p


def produce_lines(producer: Producer, fmt: LineFormat, lines: Iterator[bytes | None], args: argparse.Namespace,
                  reader: LineReader | None = None) -> None:  # fmt: skip
    """Feed lines to the producer; a None line means the linger expired (flush what is pending)."""
    n = 0
    for raw in lines:
        if raw is None:
            producer.flush()
            continue
        n += 1
        try:
            record = fmt.parse(raw.decode("utf-8", errors="surrogateescape"), n)
        except ToolError:
            producer.flush()
            raise
        producer.add(record, 0 if args.sync else args.batch_size)
    producer.flush()


def _stdin_lines(reader: LineReader, linger_s: float) -> Iterator[bytes | None]:
    waiting = False
    while True:
        line = reader.readline(linger_s if waiting else None)
        if line is None:
            if reader.eof:
                return
            waiting = False
            yield None
            continue
        waiting = True
        yield line


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)

    def body() -> int:
        fmt = LineFormat.from_properties(parse_properties(args.property))
        acks = parse_acks(args.request_required_acks)
        with KafkaClient(bootstrap_of(args), client_id=args.client_id, security=security_of(args)) as client:
            producer = Producer(
                client, args.topic, acks=acks, compression=CODECS[args.compression_codec],
                timeout_ms=args.request_timeout_ms, retries=max(0, args.message_send_max_retries),
            )  # fmt: skip
            reader = LineReader(sys.stdin.fileno())
            try:
                produce_lines(producer, fmt, _stdin_lines(reader, args.timeout / 1000), args)
            except KeyboardInterrupt:
                producer.flush()
        if producer.failed:
            raise ToolError(
                f"{producer.failed} of {producer.failed + producer.sent} messages were not written"
            )
        return 0

    return run(body, "ERROR")


if __name__ == "__main__":
    sys.exit(main())
