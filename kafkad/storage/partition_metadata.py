"""Kafka's `partition.metadata` file (KIP-516): the topic id of the partition directory it sits in.

Format (Kafka's PartitionMetadataFile)::

    version: 0
    topic_id: <the id as URL-safe base64 without padding>

Written once when the partition is created (or first learns its topic's id), atomically (temp file,
fsync, rename), and read back when the broker restarts, so a topic keeps its id. Blocking: small files,
written at topic creation (already small filesystem work) and read once per topic.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from kafkad.storage.checkpoints import write_atomic

FILE_NAME = "partition.metadata"
VERSION = 0
ZERO = uuid.UUID(int=0)


def encode_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def read(directory: Path) -> uuid.UUID | None:
    """The topic id stored in `directory`, or None if there is no (readable) file."""
    try:
        lines = (directory / FILE_NAME).read_text().splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    if fields.get("version") != str(VERSION) or "topic_id" not in fields:
        return None
    try:
        return decode_id(fields["topic_id"].strip())
    except ValueError:
        return None


def write(directory: Path, topic_id: uuid.UUID) -> None:
    write_atomic(directory / FILE_NAME, f"version: {VERSION}\ntopic_id: {encode_id(topic_id)}\n".encode())
