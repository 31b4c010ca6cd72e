"""Opening a partition directory's segments (Kafka `LogLoader`): cleanup, sanity checks, recovery.

`load_segments` first completes the log cleaner's committed swaps (`cleaner_swap.recover_swaps`),
then removes leftovers (`*.deleted`, `*.tmp`, `*.cleaned`, `*.swap`, indexes without a
log), opens every `NNNNNNNNNNNNNNNNNNNN.log` in base-offset order and decides per segment:
- recovery requested (unclean shutdown) and the segment may hold offsets >= the recovery point ->
  `LogSegment.recover(recovery_point)` (valid prefix, torn tail truncated, indexes rebuilt; the
  batches below the recovery point were fsynced, so only their headers are walked, and the CRC check
  starts at the first batch reaching it: a crash costs a CRC pass over the unflushed data only);
- otherwise trust it, but recover anyway (CRC-checking all of it) if an index file is missing or
  fails its sanity check, or, for the active segment, if its tail does not end on a batch boundary at
  the file size or disagrees with its indexes (segment_tail: the clean-shutdown marker is a hint, not
  a proof). That check walks only the headers the log end offset needs anyway, plus one CRC.
A segment whose tail was truncated makes every later segment unreachable: they are deleted (Kafka).
Only the recovered suffix's batch headers are returned (leader epochs and producer state are
rebuilt from them); after a clean shutdown nothing is scanned.
Whatever fails here (an unreadable file, an index that cannot be rebuilt) closes the segments
opened so far and propagates: the LogManager takes that partition offline alone.
Blocking: call in executor.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.checkpoints import remove_quietly
from kafkad.storage.cleaner_swap import recover_swaps
from kafkad.storage.records import BatchHeader
from kafkad.storage.segment import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from kafkad.storage.segment_tail import verify_tail
from kafkad.storage.txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".tmp", ".cleaned", ".swap")


@dataclass(slots=True)
class LogStats:
    """Counters for tests and metrics: what opening the log had to read."""

    recovered_segments: int = 0
    recovered_bytes: int = 0
    truncated_bytes: int = 0
    replayed_batches: int = 0


@dataclass(slots=True)
class LoadedSegments:
    segments: list[LogSegment]
    recovered: list[BatchHeader] = field(default_factory=list)  # headers of the recovered suffix
    first_recovered: int | None = None  # base offset where that suffix starts
    next_offset: int | None = None  # the log end, when the clean-start check of the tail found it


def _base(path: Path) -> int | None:
    return _base_of(path.name)


def _base_of(name: str) -> int | None:
    stem = name[:20]
    return int(stem) if len(name) > 20 and stem.isdigit() else None


def load_segments(
    directory: Path,
    *,
    recover: bool,
    recovery_point: int,
    new_segment: Callable[[int], LogSegment],
    stats: LogStats,
    contiguous: bool = False,
) -> LoadedSegments:
    """Blocking: open (and where needed recover) the segments of `directory`, oldest first.

    `contiguous` (a log the cleaner never compacts): each segment's offsets run up to the next
    segment's base, so a recovered segment ending short of it lost its tail (later segments go).
    """
    recover_swaps(directory)  # before the leftovers go: a committed `.swap` must win
    # One os.scandir serves everything below: a clean start opens every partition, and each pathlib
    # glob or exists() cost more than the rest of opening a small partition.
    names: set[str] = set()
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(LEFTOVER_SUFFIXES):
                remove_quietly(directory / entry.name)
            else:
                names.add(entry.name)
    bases = sorted(b for n in names if n.endswith(LOG_SUFFIX) and (b := _base_of(n)) is not None)
    known = set(bases)
    for n in names:
        if n.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
            b = _base_of(n)
            if b is not None and b not in known:
                remove_quietly(directory / n)
    out = LoadedSegments([])
    try:
        _open_all(directory, names, bases, out, recover, recovery_point, new_segment, stats, contiguous)
    except BaseException:
        _close_all(out)  # the partition goes offline: leak no fds
        raise
    if recover and recovery_point > 0 and out.segments and _end_of(out) < recovery_point:
        # The checkpoint says more was fsynced than the files hold (the disk lost fsynced data, or
        # the checkpoint is wrong): trust no part of it, CRC-check every segment.
        log.warning(
            "%s: recovery point %d is past the log end %d; recovering every segment",
            directory,
            recovery_point,
            _end_of(out),
        )
        _close_all(out)
        return load_segments(
            directory,
            recover=True,
            recovery_point=0,
            new_segment=new_segment,
            stats=stats,
            contiguous=contiguous,
        )
    for seg in out.segments[:-1]:
        if any(ix.file_length > ix.size_bytes for ix in (seg.offset_index, seg.time_index)):
            seg.on_becoming_inactive()  # a recovered older segment: trim like a roll would
    return out


def _close_all(out: LoadedSegments) -> None:
    for seg in out.segments:
        with contextlib.suppress(OSError):
            seg.close()


def _end_of(out: LoadedSegments) -> int:
    """The log end after a recovery (the active segment is always recovered then)."""
    active = out.segments[-1]
    last = out.recovered[-1] if out.recovered else None
    if last is None or last.base_offset < active.base_offset:
        return active.base_offset
    return last.base_offset + last.last_offset_delta + 1


def _open_all(
    directory: Path,
    names: set[str],
    bases: list[int],
    out: LoadedSegments,
    recover: bool,
    recovery_point: int,
    new_segment: Callable[[int], LogSegment],
    stats: LogStats,
    contiguous: bool,
) -> None:
    for i, base in enumerate(bases):
        stem = f"{base:020d}"
        has_index = stem + INDEX_SUFFIX in names and stem + TIME_INDEX_SUFFIX in names
        seg = new_segment(base)
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        must_recover = recover and (next_base is None or next_base > recovery_point)
        # The fsynced batches below the recovery point skip their CRC, except in a segment whose
        # index failed its checks (something else went wrong there: check it all).
        flushed_until = recovery_point if must_recover else -1
        if not must_recover and seg.size:
            try:
                if not has_index:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{seg.log_path}: index missing")
                seg.sanity_check(next_base)
                if next_base is None:  # the marker is a hint: the active segment's tail must agree
                    out.next_offset = verify_tail(seg)
            except KafkaError as exc:
                log.warning("%s; recovering the segment", exc.message)
                must_recover = True  # flushed_until is -1 here: CRC-check all of it
        out.segments.append(seg)
        if not must_recover:
            out.first_recovered, out.recovered = None, []  # only a recovered suffix is useful
            continue
        headers, truncated = seg.recover(flushed_until)
        stats.recovered_segments += 1
        stats.recovered_bytes += seg.size + truncated
        stats.truncated_bytes += truncated
        if out.first_recovered is None:
            out.first_recovered = base
        out.recovered.extend(headers)
        if next_base is None:
            continue
        end = headers[-1].base_offset + headers[-1].last_offset_delta + 1 if headers else base
        if contiguous and end != next_base and not truncated:
            # A power loss took the tail of this segment (or a whole segment after it) but left a
            # later one: serving that one would skip offsets a replica or consumer may hold.
            log.warning("%s: segment %d ends at %d, the next starts at %d", directory, base, end, next_base)
            truncated = 1
        if truncated:
            for later in bases[i + 1 :]:
                log.warning("%s: deleting segment %d after a corrupt batch", directory, later)
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    remove_quietly(directory / f"{later:020d}{suffix}")
            break
