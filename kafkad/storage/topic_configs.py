"""Per-topic config overrides kept beside the logs (standalone mode has no ZooKeeper /config/topics).

Each partition directory of a topic with overrides holds `kafkad-topic.properties`: the topic's
overrides as Java-properties `key=value` lines (Kafka's topic keys, e.g. `retention.ms=1000`). Every
partition dir gets the same file, so any one surviving dir is enough to recover the topic's config
and a dir moved between log dirs carries its config with it. No file = no overrides.

Writes are atomic (temp -> fsync -> rename). Functions here are blocking: call in executor.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from kafkad.storage.meta_properties import format_properties, parse_properties, write_text_atomically

TOPIC_CONFIG_FILE = "kafkad-topic.properties"


def read_topic_overrides(partition_dir: Path) -> dict[str, str]:
    """Blocking: the overrides stored in a partition dir ({} when there is no file)."""
    try:
        text = (partition_dir / TOPIC_CONFIG_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return parse_properties(text)


def write_topic_overrides(partition_dir: Path, overrides: Mapping[str, str]) -> None:
    """Blocking: replace the stored overrides atomically; empty overrides remove the file."""
    path = partition_dir / TOPIC_CONFIG_FILE
    if not overrides:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    write_text_atomically(path, format_properties(sorted(overrides.items())))
