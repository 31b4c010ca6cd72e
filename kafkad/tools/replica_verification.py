"""kafkad-replica-verification: Kafka's ReplicaVerificationTool (kafka-replica-verification.sh).

For every partition of the topics matching --topic-white-list, fetches the same offsets from every replica
(Fetch with replica_id -2, Kafka's debugging consumer, which a follower serves up to its high watermark) and
compares them batch by batch: base offset, last offset and CRC, i.e. the bytes of every record. A mismatch
prints Kafka's message and exits 1. Every --report-interval-ms it prints "max lag is N for partition P at
offset O among K partitions" (lag = how far the slowest replica's high watermark trails the fastest's).

Like Kafka's tool it runs until interrupted. kafkad adds --once: verify from --time up to each partition's
smallest high watermark at start, print the report and exit (0 = replicas identical).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.storage.records import iter_headers
from kafkad.tools._cli import bootstrap_of, parse_args, run, security_of, tool_parser
from kafkad.tools.client import KafkaApiError, KafkaClient, ToolError, check
from kafkad.tools.get_offsets import EARLIEST, list_offsets, parse_time

DEBUGGING_CONSUMER_ID = -2
MAX_STALLED_ROUNDS = 30  # --once: rounds without a verified batch before giving up (each waits max-wait-ms)


class Mismatch(ToolError):
    pass


@dataclass
class PartitionCheck:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    offset: int
    stop_at: int | None = None  # --once: verified once `offset` reaches it
    hws: dict[int, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"[{self.topic},{self.partition}]"

    @property
    def done(self) -> bool:
        return self.stop_at is not None and self.offset >= self.stop_at

    def lag(self) -> int:
        return max(self.hws.values()) - min(self.hws.values()) if self.hws else 0


def _fetch(
    client: KafkaClient, node: int, pc: PartitionCheck, fetch_size: int, max_wait_ms: int
) -> tuple[int, list[tuple[int, int, int]]]:
    """(high watermark, [(base offset, last offset, crc)]) of the replica on `node` from pc.offset."""
    body = {
        "replica_id": DEBUGGING_CONSUMER_ID,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": fetch_size,
        "isolation_level": 0,
        "topics": [
            {
                "topic": pc.topic,
                "partitions": [
                    {"partition": pc.partition, "fetch_offset": pc.offset, "partition_max_bytes": fetch_size}
                ],
            }
        ],
    }
    resp = client.node(node).send(ApiKey.FETCH, body)
    check(resp.get("error_code", 0), f"Fetch from broker {node}")
    part = resp["responses"][0]["partitions"][0]
    check(part["error_code"], f"Partition {pc.name} on broker {node}")
    records = bytes(part["records"] or b"")
    return part["high_watermark"], [(h.base_offset, h.last_offset, h.crc) for h in iter_headers(records)]


def verify_round(client: KafkaClient, pc: PartitionCheck, fetch_size: int, max_wait_ms: int) -> int:
    """Fetch every replica once at pc.offset, compare, advance; the number of batches verified."""
    got: dict[int, list[tuple[int, int, int]]] = {}
    for r in pc.replicas:
        hw, batches = _fetch(client, r, pc, fetch_size, max_wait_ms)
        pc.hws[r] = hw
        got[r] = batches
    limit = min(pc.hws.values())
    if pc.stop_at is not None:
        limit = min(limit, pc.stop_at)
    common = min(len(b) for b in got.values())
    first = pc.replicas[0]
    verified = 0
    for i in range(common):
        base, last, crc = got[first][i]
        if last >= limit:
            break
        for r in pc.replicas[1:]:
            b2, l2, c2 = got[r][i]
            if (b2, l2) != (base, last):
                raise Mismatch(
                    f"Partition {pc.name}: replica {first}'s offset {base} doesn't match replica {r}'s offset {b2}"
                )
            if c2 != crc:
                raise Mismatch(
                    f"Partition {pc.name} has unmatched checksum at offset {base}; replica {first}'s checksum "
                    f"{crc}; replica {r}'s checksum {c2}"
                )
        pc.offset = last + 1
        verified += 1
    return verified


def report(checks: Sequence[PartitionCheck]) -> str:
    worst = max(checks, key=lambda c: c.lag(), default=None)
    now = time.strftime("%Y-%m-%d %H:%M:%S,000")
    if worst is None:
        return f"{now}: no partitions to verify"
    return (
        f"{now}: max lag is {worst.lag()} for partition {worst.name} at offset {worst.offset} "
        f"among {len(checks)} partitions"
    )


def build_parser() -> argparse.ArgumentParser:
    p = tool_parser(
        "kafkad-replica-verification", "Validate that all replicas for a set of topics have the same data."
    )
    p.add_argument("--fetch-size", type=int, default=1024 * 1024, help="The fetch size of each request.")
    p.add_argument(
        "--max-wait-ms", type=int, default=1000, help="The max amount of time each fetch request waits."
    )
    p.add_argument(
        "--topic-white-list",
        "--topics-include",
        dest="topics",
        default=".*",
        help="Regular expression of the topics to verify (default: all).",
    )
    p.add_argument(
        "--time", default="-1", help="Timestamp for getting the initial offsets: -1 latest, -2 earliest."
    )
    p.add_argument("--report-interval-ms", type=int, default=30000, help="The reporting interval.")
    p.add_argument(
        "--once",
        action="store_true",
        help="(kafkad) verify up to every partition's smallest high watermark at start, then exit",
    )
    return p


def _checks(client: KafkaClient, pattern: str, timestamp: int, once: bool) -> list[PartitionCheck]:
    md = client.metadata(None)
    rx = re.compile(pattern)
    out: list[PartitionCheck] = []
    for name, t in sorted(md.topics.items()):
        if not rx.fullmatch(name):
            continue
        leaders = {p.partition: p.leader for p in t.partitions}
        starts = list_offsets(client, name, leaders, timestamp, leaders)
        ends = list_offsets(client, name, leaders, -1, leaders) if once else {}
        for p in t.partitions:
            start = starts[p.partition]
            if start.error_code != ErrorCode.NONE:
                raise KafkaApiError(ErrorCode(start.error_code), f"Partition [{name},{p.partition}]")
            stop = ends[p.partition].offset if once else None
            out.append(PartitionCheck(name, p.partition, p.replicas, start.offset, stop))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)

    def body() -> int:
        timestamp = parse_time(args.time)
        if args.once and timestamp == -1:
            timestamp = EARLIEST  # --once verifies what is there
        with KafkaClient(bootstrap_of(args), client_id=args.client_id, security=security_of(args)) as client:
            checks = _checks(client, args.topics, timestamp, args.once)
            print(f"{time.strftime('%Y-%m-%d %H:%M:%S,000')}: verification process is started.")
            last_report = time.monotonic()
            stalled = 0
            try:
                while True:
                    progress = sum(
                        verify_round(client, pc, args.fetch_size, args.max_wait_ms)
                        for pc in checks
                        if not pc.done
                    )
                    if args.once and all(pc.done for pc in checks):
                        print(report(checks))
                        return 0
                    if time.monotonic() - last_report >= args.report_interval_ms / 1000:
                        print(report(checks), flush=True)
                        last_report = time.monotonic()
                    stalled = 0 if progress else stalled + 1
                    if args.once and stalled >= MAX_STALLED_ROUNDS:
                        raise ToolError(
                            "replicas stopped progressing before the high watermark: "
                            + ", ".join(
                                f"{pc.name} at {pc.offset} < {pc.stop_at}" for pc in checks if not pc.done
                            )
                        )
            except Mismatch as e:
                print(str(e), flush=True)
                return 1

    return run(body, "Error occurred")


if __name__ == "__main__":
    sys.exit(main())
