"""Swapping cleaned segments into a log, crash-safely (Kafka `LocalLog.replaceSegments`, LogLoader).

A group of old segments o_1..o_k (base b = o_1's base) is replaced by its cleaned output in steps:
 1. (cleaner thread) `<b>.log.cleaned`, `<b>.index.cleaned`, `<b>.timeindex.cleaned`, (if it has
    entries) `<b>.txnindex.cleaned` and `<b>.range.cleaned` (the group's end offset) are written and
    fsynced.
 2. `commit_swap`: both indexes `.cleaned` -> `.swap`, then `<b>.log.cleaned` -> `<b>.log.swap`:
    THE commit point.
 3. the old segments are renamed `*.deleted` (PartitionLog's delayed deletion: fds stay open).
 4. `finish_swap`: `<b>.*.swap` -> final names, then the range file is removed.
Renames are metadata-only, so steps 2-4 run on the event loop; the directory is fsynced afterwards on
the cleaner thread.

`recover_swaps` (LogLoader, before leftovers are removed) makes any crash land on one side:
- no `<b>.log.swap`: the commit never happened; every `.cleaned`/`.swap` file is a leftover the
  loader deletes, and the old segments are untouched (rollback);
- `<b>.log.swap` present: the commit happened; every segment with a base in [b, end) is deleted
  (end read from the range file; without it, the swap log's last offset + 1), then the swap files take
  their final names (a missing index is rebuilt by the loader's recovery). Idempotent: a crash during
  recovery is recovered the same way at the next start.
Blocking (small filesystem operations).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kafkad.storage.checkpoints import fsync_dir, remove_quietly
from kafkad.storage.cleaner_rewrite import CLEANED_SUFFIX, RANGE_SUFFIX, cleaned_paths, txn_index_cleaned_path
from kafkad.storage.records import iter_headers
from kafkad.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, file_stem
from kafkad.storage.txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

SWAP_SUFFIX = ".swap"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def swap_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / (file_stem(base_offset) + suffix + SWAP_SUFFIX)


def commit_swap(directory: Path, base_offset: int) -> None:
    """Steps 2: indexes first, the log last (its rename is the commit point)."""
    log_c, index_c, time_c, _ = cleaned_paths(directory, base_offset)
    txn_c = txn_index_cleaned_path(directory, base_offset)
    if os.path.exists(txn_c):  # only a group that keeps aborted transactions' markers has one
        os.rename(txn_c, swap_path(directory, base_offset, TXN_INDEX_SUFFIX))
    os.rename(index_c, swap_path(directory, base_offset, INDEX_SUFFIX))
    os.rename(time_c, swap_path(directory, base_offset, TIME_INDEX_SUFFIX))
    os.rename(log_c, swap_path(directory, base_offset, LOG_SUFFIX))


def finish_swap(directory: Path, base_offset: int) -> None:
    """Step 4: the swap files take their final names (the old files must be renamed away already)."""
    stem = file_stem(base_offset)
    txn_swap = swap_path(directory, base_offset, TXN_INDEX_SUFFIX)
    if os.path.exists(txn_swap):
        os.rename(txn_swap, directory / (stem + TXN_INDEX_SUFFIX))
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
        os.rename(swap_path(directory, base_offset, suffix), directory / (stem + suffix))
    remove_quietly(cleaned_paths(directory, base_offset)[3])


def _base(name: str) -> int | None:
    stem = name[:20]
    return int(stem) if len(name) > 20 and stem.isdigit() else None


def _end_offset(directory: Path, base_offset: int) -> int:
    range_path = cleaned_paths(directory, base_offset)[3]
    try:
        return int(range_path.read_text().strip())
    except (OSError, ValueError):
        # The range file is fsynced before the commit, so this is only a damaged directory: fall back
        # to what the swap log holds.
        data = swap_path(directory, base_offset, LOG_SUFFIX).read_bytes()
        end = base_offset
        for header in iter_headers(data):
            end = header.last_offset + 1
        return end


def recover_swaps(directory: Path) -> int:
    """Blocking: finish every committed swap of `directory` (see the module docstring); the count."""
    swap_log = LOG_SUFFIX + SWAP_SUFFIX
    with os.scandir(directory) as entries:  # one cheap listing: usually there is nothing to do
        names = [e.name for e in entries]
    swaps = sorted(b for n in names if n.endswith(swap_log) and (b := _base(n)) is not None)
    if not swaps:
        return 0
    log_bases = [b for n in names if n.endswith(LOG_SUFFIX) and (b := _base(n)) is not None]
    for base in swaps:
        end = _end_offset(directory, base)
        for b in log_bases:
            if base <= b < end:
                for suffix in _SEGMENT_SUFFIXES:
                    remove_quietly(directory / (file_stem(b) + suffix))
        stem = file_stem(base)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            src = swap_path(directory, base, suffix)
            if src.exists():
                os.rename(src, directory / (stem + suffix))
        os.rename(swap_path(directory, base, LOG_SUFFIX), directory / (stem + LOG_SUFFIX))
        remove_quietly(directory / (stem + RANGE_SUFFIX + CLEANED_SUFFIX))
        log.warning(
            "%s: completed the interrupted swap of cleaned segment %d (up to %d)", directory, base, end
        )
    fsync_dir(directory)
    return len(swaps)
