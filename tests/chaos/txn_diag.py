"""What the brokers say about a stalled transactional pipeline (printed by txn_runner when the input did not
drain or a fault did not recover), over the wire with kafkad's tools client, each question on its own so
one broker down does not hide the rest:

- the group: its coordinator, members and generation (DescribeGroups), its committed offsets and which
  are still pending a transaction marker (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT
  for those, beside the plain OffsetFetch);
- every transaction each broker coordinates (ListTransactions + DescribeTransactions: state,
  producer id/epoch, partitions, age);
- per partition of the input, output and group's __consumer_offsets partition: leader, high watermark and
  last stable offset (ListOffsets by isolation level) and its open transactions (DescribeProducers:
  producer id/epoch, first offset of the open transaction).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kafkad.coordinator.group.records import partition_for
from kafkad.protocol import ApiKey, ErrorCode
from kafkad.tools.client import KafkaClient

OFFSETS_TOPIC = "__consumer_offsets"
LATEST = -1


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _try(lines: list[str], what: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception as e:  # a diagnostic must never hide the run's own failure
        lines.append(f"  {what}: {type(e).__name__}: {e}"[:400])


def _group(c: KafkaClient, group: str, topic: str, partitions: int, lines: list[str]) -> None:
    fc = c.send(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0, "coordinator_keys": [group]})
    coords = fc.get("coordinators") or [fc]
    node = int(coords[0]["node_id"])
    lines.append(f"group {group}: coordinator {node} ({_name(int(coords[0]['error_code']))})")
    conn = c.node(node)
    dg = conn.send(ApiKey.DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False})
    for g in dg["groups"]:
        members = [(m["member_id"][-12:], m.get("client_id")) for m in g["members"]]
        lines.append(f"  {_name(g['error_code'])} state {g['group_state']} members {members}")
    for stable in (False, True):
        body = {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": list(range(partitions))}],
            "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                        "topics": [{"name": topic, "partition_indexes": list(range(partitions))}]}],
            "require_stable": stable,
        }  # fmt: skip
        r = conn.send(ApiKey.OFFSET_FETCH, body)
        topics = r["groups"][0]["topics"] if r.get("groups") else r.get("topics", [])
        got = {
            p["partition_index"]: (p["committed_offset"], _name(p["error_code"]))
            for t in topics
            for p in t["partitions"]
        }
        lines.append(f"  OffsetFetch require_stable={stable}: {dict(sorted(got.items()))}")


def _transactions(c: KafkaClient, brokers: Sequence[int], lines: list[str]) -> None:
    now = int(time.time() * 1000)
    for b in brokers:

        def one(b: int = b) -> None:
            conn = c.node(b)
            lt = conn.send(ApiKey.LIST_TRANSACTIONS, {"state_filters": [], "producer_id_filters": []})
            ids = [t["transactional_id"] for t in lt["transaction_states"]]
            if not ids:
                lines.append(f"  broker {b}: no transactions ({_name(lt['error_code'])})")
                return
            dt = conn.send(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": ids})
            for t in dt["transaction_states"]:
                parts = {x["topic"]: x["partitions"] for x in t["topics"]}
                age = now - t["transaction_start_time_ms"] if t["transaction_start_time_ms"] > 0 else -1
                lines.append(
                    f"  broker {b}: {t['transactional_id']} {t['transaction_state']} "
                    f"pid {t['producer_id']}/{t['producer_epoch']} {_name(t['error_code'])} "
                    f"started {age} ms ago, partitions {parts}"
                )

        _try(lines, f"broker {b} transactions", one)


def _partition(c: KafkaClient, topic: str, p: int, lines: list[str]) -> None:
    leader = c.leader(topic, p)
    conn = c.node(leader)
    ends: list[object] = []
    for iso in (0, 1):
        body = {"replica_id": -1, "isolation_level": iso, "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": LATEST, "max_num_offsets": 1}]}]}  # fmt: skip
        part = conn.send(ApiKey.LIST_OFFSETS, body)["topics"][0]["partitions"][0]
        ends.append(part.get("offset", part.get("old_style_offsets")) if part["error_code"] == 0 else
                    _name(part["error_code"]))  # fmt: skip
    dp = conn.send(ApiKey.DESCRIBE_PRODUCERS, {"topics": [{"name": topic, "partition_indexes": [p]}]})[
        "topics"
    ][0]["partitions"][0]
    open_txns = [
        (a["producer_id"], a["producer_epoch"], a["current_txn_start_offset"])
        for a in dp.get("active_producers", [])
        if a["current_txn_start_offset"] >= 0
    ]
    lines.append(
        f"  {topic}-{p}: leader {leader} hw {ends[0]} lso {ends[1]} open txns (pid, epoch, first) {open_txns}"
    )


def describe_pipeline(
    bootstrap: str, group: str, source: str, sink: str, partitions: int, offsets_partitions: int = 50
) -> str:
    """The brokers' view of the pipeline, one fact per line (never raises)."""
    lines: list[str] = ["pipeline diagnostics:"]
    try:
        c = KafkaClient(bootstrap, client_id="txn-diag", timeout_s=10.0)
    except Exception as e:
        return f"pipeline diagnostics: no broker reachable: {e}"
    try:
        _try(lines, "group", lambda: _group(c, group, source, partitions, lines))
        brokers: list[int] = []
        _try(lines, "metadata", lambda: brokers.extend(sorted(c.metadata([]).brokers)))
        lines.append("transactions per coordinator:")
        _transactions(c, brokers, lines)
        lines.append("partitions:")
        parts = [(source, p) for p in range(partitions)] + [(sink, p) for p in range(partitions)]
        parts.append((OFFSETS_TOPIC, partition_for(group, offsets_partitions)))
        for topic, p in parts:
            _try(lines, f"{topic}-{p}", lambda t=topic, p=p: _partition(c, t, p, lines))  # type: ignore[misc]
    finally:
        c.close()
    return "\n".join(lines)


def describe_processors(processors: Sequence[Any]) -> str:
    """Each processor's own view: its assignment, last consumed batch, transactions, errors."""
    out = ["processors:"]
    for p in processors:
        out.append(f"  {p.client} ({p._txn_id()}): {p.status()}")
    return "\n".join(out)
