"""What an ingest run did, per site and topic: the printed table and the JSON summary for monitoring.

JSON summary (`<output>/_kafkad_ingest_summary.json` unless `--summary-json`; rewritten atomically by
every run, also one that found nothing new)::

    {"version": 1, "run": "...", "finished_at_ms": ..., "recovered_runs": 0,
     "timings_s": {"listing": .., "planning": .., "spark": .., "commit": .., "total": ..},
     "manifests": {"listed": .., "read": ..},
     "totals": {"objects": .., "records": .., "bytes": .., "parquet_bytes": .., "lag_offsets": ..},
     "streams": [{"site": "paris", "topic": "sensors", "objects": 3, "records": 1200, "bytes": 81234,
                  "parquet_bytes": 40211, "ranges": {"0": [[0, 599]], "1": [[0, 599]]},
                  "lag_offsets": 0, "missing_offsets": 0}, ...]}

`records` are rows written (from the Parquet footers), `bytes` the shipped bytes read, `ranges` the
offsets ingested by this run per partition, `lag_offsets` what the landing holds beyond the output
after the run (per partition: the landed end minus the end of the ledger's ranges), and
`missing_offsets` the holes between the ledger's ranges (offsets that never landed, e.g. deleted by
the disk budget before they were shipped).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkad.spark_bridge.plan import Range
from kafkad.storage.checkpoints import write_atomic

SUMMARY_FILE = "_kafkad_ingest_summary.json"


@dataclass(frozen=True, slots=True)
class TopicSummary:
    """One site's topic in one run."""

    site: str
    topic: str
    objects: int  # shipped objects read (whole or in part)
    records: int
    bytes: int  # shipped bytes read
    parquet_bytes: int
    ranges: Mapping[int, tuple[Range, ...]]  # partition -> offsets ingested by this run
    lag_offsets: int
    missing_offsets: int

    def to_json(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "topic": self.topic,
            "objects": self.objects,
            "records": self.records,
            "bytes": self.bytes,
            "parquet_bytes": self.parquet_bytes,
            "ranges": {str(p): [list(r) for r in rs] for p, rs in sorted(self.ranges.items())},
            "lag_offsets": self.lag_offsets,
            "missing_offsets": self.missing_offsets,
        }


@dataclass(frozen=True, slots=True)
class IngestSummary:
    run_id: str
    topics: tuple[TopicSummary, ...]  # streams with something ingested or lagging, by site and topic
    recovered_runs: int
    timings_s: Mapping[str, float] = field(default_factory=dict)
    manifests_listed: int = 0
    manifests_read: int = 0
    finished_at_ms: int = 0

    @property
    def records(self) -> int:
        return sum(t.records for t in self.topics)

    def totals(self) -> dict[str, int]:
        keys = ("objects", "records", "bytes", "parquet_bytes", "lag_offsets", "missing_offsets")
        return {k: sum(getattr(t, k) for t in self.topics) for k in keys}

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "run": self.run_id,
            "finished_at_ms": self.finished_at_ms,
            "recovered_runs": self.recovered_runs,
            "timings_s": {k: round(v, 3) for k, v in self.timings_s.items()},
            "manifests": {"listed": self.manifests_listed, "read": self.manifests_read},
            "totals": self.totals(),
            "streams": [t.to_json() for t in self.topics],
        }

    def write(self, path: Path) -> None:
        write_atomic(path, json.dumps(self.to_json(), indent=1).encode() + b"\n")

    def table(self) -> str:
        head = ("site", "topic", "objects", "records", "bytes", "offsets", "lag")
        rows = [head]
        for t in self.topics:
            spans = [f"{p}:{a}-{b}" for p, rs in sorted(t.ranges.items()) for a, b in rs]
            offsets = " ".join(spans[:3]) + (f" +{len(spans) - 3}" if len(spans) > 3 else "")
            rows.append(
                (t.site, t.topic, str(t.objects), str(t.records), str(t.bytes), offsets, str(t.lag_offsets))
            )
        tot = self.totals()
        rows.append(
            (
                "TOTAL",
                "",
                str(tot["objects"]),
                str(tot["records"]),
                str(tot["bytes"]),
                "",
                str(tot["lag_offsets"]),
            )
        )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        left = {0, 1, 5}
        lines = [
            "  ".join(
                c.ljust(w) if i in left else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
            for r in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(line.rstrip() for line in lines)
