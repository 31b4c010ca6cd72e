"""Checkpoint files: atomic replace, Kafka's offset-checkpoint and leader-epoch-checkpoint text formats.

Every checkpoint is written as `<file>.<thread>.tmp` -> fsync -> rename over `<file>` -> fsync of the directory,
so a crash leaves either the old or the new file, never a torn one (Kafka `CheckpointFile`).

Offset checkpoints (recovery-point-offset-checkpoint, replication-offset-checkpoint,
log-start-offset-checkpoint, cleaner-offset-checkpoint)::

    0            <- version
    2            <- number of entries
    topic 0 42   <- topic partition offset
    topic 1 17

leader-epoch-checkpoint: the same header, then `epoch startOffset` lines.
All functions here are blocking: call in executor.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from kafkad.protocol.errors import ErrorCode, KafkaError

CHECKPOINT_VERSION = 0


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Blocking: make a rename/creation in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True, mode: int = 0o644) -> None:
    """Blocking: replace `path` by `data` via temp file + rename (fsyncs unless `fsync=False`).

    fsync=False still never exposes a torn file (rename is atomic); it only may lose the update on a
    power cut, for files that recovery can rebuild anyway.
    """
    target = Path(path)
    # A temp name per thread: two writers of one file (the loop creating a partition of a topic with
    # overrides, a config change applying them on an executor thread) must not rename each other's temp.
    tmp = target.with_name(f"{target.name}.{threading.get_ident():x}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    if fsync:
        fsync_dir(target.parent)


def _parse_lines(path: Path, text: str, fields: int) -> list[list[str]]:
    lines = text.splitlines()
    try:
        version = int(lines[0])
        count = int(lines[1])
    except (IndexError, ValueError):
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{path}: malformed checkpoint header") from None
    if version != CHECKPOINT_VERSION:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{path}: unknown checkpoint version {version}")
    rows = [line.split() for line in lines[2:] if line.strip()]
    if len(rows) != count or any(len(r) != fields for r in rows):
        raise KafkaError(
            ErrorCode.KAFKA_STORAGE_ERROR, f"{path}: expected {count} entries of {fields} fields"
        )
    return rows


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def format_offsets(offsets: Mapping[tuple[str, int], int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode()


def write_offsets(path: str | os.PathLike[str], offsets: Mapping[tuple[str, int], int]) -> None:
    """Blocking: write an offset checkpoint ({(topic, partition): offset}) atomically."""
    write_atomic(path, format_offsets(offsets))


def read_offsets(path: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """Blocking: read an offset checkpoint; {} if absent; KafkaError(KAFKA_STORAGE_ERROR) if malformed."""
    p = Path(path)
    text = _read(p)
    if text is None:
        return {}
    out: dict[tuple[str, int], int] = {}
    try:
        for topic, partition, offset in _parse_lines(p, text, 3):
            out[(topic, int(partition))] = int(offset)
    except ValueError:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{p}: malformed checkpoint entry") from None
    return out


def format_epochs(entries: Iterable[tuple[int, int]]) -> bytes:
    rows = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(rows))] + [f"{e} {o}" for e, o in rows]
    return ("\n".join(lines) + "\n").encode()


def write_epochs(
    path: str | os.PathLike[str], entries: Iterable[tuple[int, int]], *, fsync: bool = True
) -> None:
    """Blocking: write a leader-epoch-checkpoint of (epoch, start_offset) rows atomically."""
    write_atomic(path, format_epochs(entries), fsync=fsync)


def read_epochs(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """Blocking: (epoch, start_offset) rows of a leader-epoch-checkpoint; [] if absent."""
    p = Path(path)
    text = _read(p)
    if text is None:
        return []
    try:
        return [(int(e), int(o)) for e, o in _parse_lines(p, text, 2)]
    except ValueError:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{p}: malformed epoch entry") from None


def remove_quietly(path: str | os.PathLike[str]) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
