"""docs/api-versions.md, generated from the handler registry and Kafka 3.9's ranges.

    PYTHONPATH=. .venv/bin/python -m tests.unit.protocol.api_versions_table > docs/api-versions.md

test_api_versions_matrix checks the committed file is this module's output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafkad.api import load_handlers

KAFKA_39 = Path(__file__).with_name("kafka39_api_versions.json")

# Versions kafkad deliberately stops below Kafka 3.9's maximum, and why (the matrix test allows these only).
CAPPED: dict[int, tuple[int, str]] = {}


def kafka_39() -> dict[int, dict[str, Any]]:
    return {int(k): v for k, v in json.loads(KAFKA_39.read_text()).items()}


def render() -> str:
    kafka = kafka_39()
    registry = load_handlers()
    rows = [
        "# API versions kafkad serves",
        "",
        "Generated from the handler registry (`python -m tests.unit.protocol.api_versions_table`), beside",
        "the ranges a Kafka 3.9 broker in ZooKeeper mode accepts (its message JSON's `validVersions`;",
        "`scripts/gen_protocol_schema.py` writes them to tests/unit/protocol/kafka39_api_versions.json).",
        "ApiVersions advertises exactly the kafkad column. A request outside it closes the connection, as",
        "Kafka's does, except ApiVersions, answered UNSUPPORTED_VERSION with its own range (KIP-511).",
        "",
        "- The schema tables (kafkad/protocol/apis_*.py) are generated from Kafka 3.9's message JSON by",
        "  `scripts/gen_protocol_schema.py MESSAGE_DIR` (`--check` compares); handlers read every version's",
        "  fields by name and the decoder fills the fields a version lacks with their defaults.",
        "- Message format v0/v1 (Produce v0-2, Fetch v0-3) is converted to and from the stored v2 batches",
        "  (kafkad/storage/records/legacy.py): a broken message set is CORRUPT_MESSAGE and nothing is stored;",
        "  the cost is the `make bench` scenario `conversion` (tests/bench/bench_conversion.py).",
        "- Topic ids (KIP-516): the topic znode's `topic_id` in cluster mode, `partition.metadata` in each",
        "  partition directory (both modes); Metadata v10+ serve them, Fetch v13+ and DeleteTopics v6 take them.",
        "",
        "| key | API | kafkad | Kafka 3.9 | flexible | note |",
        "|---:|---|---|---|---|---|",
    ]
    for key in sorted(set(kafka) | {e["api_key"] for e in registry.api_versions()}):
        spec = registry.get(key)
        k = kafka.get(key)
        ours = f"{spec.min_version}-{spec.max_version}" if spec else "-"
        theirs = f"{k['min']}-{k['max']}" if k else "-"
        note = CAPPED[key][1] if key in CAPPED else ("" if spec else "not served")
        name = k["name"] if k else str(key)
        flex = k["flexible"] if k else ""
        rows.append(f"| {key} | {name} | {ours} | {theirs} | {flex} | {note} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render(), end="")
