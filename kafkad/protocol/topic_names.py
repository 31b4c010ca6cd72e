"""Kafka's topic naming rules (its common.internals.Topic): legal names and the internal topics."""

from __future__ import annotations

import re

_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def topic_name_error(name: str | None) -> str | None:
    """Kafka's Topic.validate: why `name` is not a legal topic name, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_LENGTH} characters"
    if not _TOPIC_RE.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None
