"""kafkad-get-offsets: Kafka's GetOffsetShell (kafka-get-offsets.sh) over ListOffsets.

Prints one "topic:partition:offset" line per partition, sorted by topic then partition. --time is -1/latest
(the log end offset), -2/earliest (the log start offset), -3/max-timestamp (needs ListOffsets v7), or a
timestamp in ms (the first offset whose timestamp is >= it). Partitions without such an offset are left out,
as GetOffsetShell does. `list_offsets` is shared with the console consumer.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.tools._cli import bootstrap_of, parse_args, run, security_of, tool_parser
from kafkad.tools.client import KafkaApiError, KafkaClient, ToolError

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
_NAMED = {"latest": LATEST, "earliest": EARLIEST, "max-timestamp": MAX_TIMESTAMP}


@dataclass(frozen=True, slots=True)
class OffsetResult:
    partition: int
    error_code: int
    offset: int
    timestamp: int


def parse_time(text: str) -> int:
    value = _NAMED.get(text.strip().lower())
    if value is not None:
        return value
    try:
        value = int(text)
    except ValueError:
        raise ToolError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
                        "max-timestamp, or a specified long format timestamp") from None  # fmt: skip
    if value < MAX_TIMESTAMP:
        raise ToolError(f"Malformed time argument {text}: a timestamp in ms is >= 0")
    return value


def parse_partitions(text: str | None) -> list[int] | None:
    """ "0,1,4-6" -> [0, 1, 4, 5, 6]; None -> None (all partitions)."""
    if not text:
        return None
    out: list[int] = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            out.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    except ValueError:
        raise ToolError(f"Invalid --partitions '{text}': expected a list like 0,1,4-6") from None
    return sorted(set(out))


def list_offsets(client: KafkaClient, topic: str, partitions: Iterable[int], timestamp: int,
                 leaders: dict[int, int] | None = None) -> dict[int, OffsetResult]:  # fmt: skip
    """ListOffsets for `partitions` of `topic`, one request per leader broker."""
    if leaders is None:
        info = client.metadata([topic]).topic(topic)
        leaders = {p.partition: p.leader for p in info.partitions}
    wanted = list(partitions)
    if timestamp == MAX_TIMESTAMP and client.conn.version(ApiKey.LIST_OFFSETS) < 7:
        raise ToolError("--time -3 (max-timestamp) needs ListOffsets v7, which this broker does not speak")
    out: dict[int, OffsetResult] = {}
    by_leader: dict[int, list[int]] = {}
    for p in wanted:
        leader = leaders.get(p)
        if leader is None:
            out[p] = OffsetResult(p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
        elif leader < 0:
            out[p] = OffsetResult(p, ErrorCode.LEADER_NOT_AVAILABLE, -1, -1)
        else:
            by_leader.setdefault(leader, []).append(p)
    for leader, parts in by_leader.items():
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                        for p in parts
                    ],
                }
            ],
        }
        for t in client.node(leader).send(ApiKey.LIST_OFFSETS, body)["topics"]:
            for r in t["partitions"]:
                p = r["partition_index"]
                out[p] = OffsetResult(p, r["error_code"], r["offset"], r["timestamp"])
    return out


def format_lines(topic: str, results: dict[int, OffsetResult]) -> tuple[list[str], list[str]]:
    """(stdout lines, stderr lines) for one topic's results."""
    lines: list[str] = []
    errors: list[str] = []
    for p in sorted(results):
        r = results[p]
        if r.error_code != ErrorCode.NONE:
            code = ErrorCode(r.error_code)
            msg = KafkaApiError(code).message
            errors.append(f"Skip getting offsets for topic-partition {topic}:{p} due to error: {msg}")
        elif r.offset >= 0:
            lines.append(f"{topic}:{p}:{r.offset}")
    return lines, errors


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser("kafkad-get-offsets", "An interactive shell for getting topic-partition offsets.")
    p.add_argument("--topic", help="The topic to get offsets for (a regex; default: all topics).")
    p.add_argument("--partitions", help="Comma-separated partition ids (ranges like 2-4 allowed).")
    p.add_argument(
        "--time", default="-1", help="-1/latest, -2/earliest, -3/max-timestamp or a timestamp (ms)."
    )
    p.add_argument("--exclude-internal-topics", action="store_true", help="Leave out internal topics.")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)

    def body() -> int:
        timestamp = parse_time(args.time)
        wanted_parts = parse_partitions(args.partitions)
        failed = False
        with KafkaClient(bootstrap_of(args), client_id=args.client_id, security=security_of(args)) as client:
            md = client.metadata(None)
            rx = re.compile(args.topic) if args.topic else None
            topics = [
                t for name, t in sorted(md.topics.items())
                if (rx is None or rx.fullmatch(name))
                and not (args.exclude_internal_topics and (t.is_internal or name.startswith("__")))
            ]  # fmt: skip
            if args.topic and not topics:
                raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{args.topic}'")
            for t in topics:
                leaders = {p.partition: p.leader for p in t.partitions}
                parts = [p for p in leaders if wanted_parts is None or p in wanted_parts]
                lines, errors = format_lines(t.name, list_offsets(client, t.name, parts, timestamp, leaders))
                for line in lines:
                    print(line)
                for err in errors:
                    failed = True
                    print(err, file=sys.stderr)
        return 1 if failed else 0

    return run(body, "Error occurred")


if __name__ == "__main__":
    sys.exit(main())
