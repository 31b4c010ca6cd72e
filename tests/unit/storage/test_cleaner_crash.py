"""Log cleaner crash safety: a crash at every step of the swap leaves a consistent log on reopen."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkad.clock import ManualClock
from kafkad.storage import cleaner_rewrite
from kafkad.storage.partition_log import PartitionLog
from tests.unit.storage.test_cleaner_support import (
    Seen,
    cleaner_for,
    keyed,
    latest,
    open_compacted,
    produce,
    read_records,
)


class Crash(BaseException):
    """The process dies here: nothing after it runs, no cleanup handler sees it."""


def _build(root: Path, clock: ManualClock) -> tuple[PartitionLog, list[Seen]]:
    # Small segments, two per group: the pass swaps several groups of several old segments each.
    plog = open_compacted(root, clock, overrides={"segment.bytes": "2048"})
    for r in range(6):
        produce(plog, clock, keyed(3, 10, tag=f"r{r}-"))
        plog.roll()
    produce(plog, clock, keyed(3, 1, tag="active"))
    return plog, read_records(plog)


def _check_consistent(plog: PartitionLog, original: list[Seen]) -> None:
    got = read_records(plog)
    offsets = [r[0] for r in got]
    assert offsets == sorted(set(offsets)), "offsets must be unique and increasing"
    by_offset = {r[0]: r for r in original}
    assert all(by_offset[r[0]] == r for r in got), "a record changed its offset or content"
    assert latest(got) == latest(original), "a latest value was lost"
    assert plog.log_end_offset == original[-1][0] + 1
    leftovers = [p.name for p in plog.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert leftovers == []


def _count_renames(root: Path) -> int:
    clock = ManualClock()
    plog, _ = _build(root, clock)
    calls = 0
    real = os.rename

    def counting(*args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        real(*args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(os, "rename", counting)
    try:
        stats = cleaner_for(plog, clock).clean_all_now()
    finally:
        mp.undo()
    assert stats[0].groups >= 2
    return calls


def _crash_and_reopen(root: Path, inject: Callable[[pytest.MonkeyPatch], None]) -> bool:
    """Crash the cleaner where `inject` says, reopen, check; whether a committed swap was left."""
    clock = ManualClock()
    plog, original = _build(root, clock)
    mp = pytest.MonkeyPatch()
    inject(mp)
    try:
        with pytest.raises(Crash):
            cleaner_for(plog, clock).clean_all_now()
    finally:
        mp.undo()
    plog.release()  # the dead process's fds; nothing is written
    committed = any(p.name.endswith(".log.swap") for p in (root / "t-0").iterdir())
    reopened = open_compacted(root, clock, recover=True)
    _check_consistent(reopened, original)
    # The next cleaning finishes the job: one record per key below the active segment.
    cleaner_for(reopened, clock).clean_all_now()
    _check_consistent(reopened, original)
    closed = [r for r in read_records(reopened) if r[0] < reopened.active_segment.base_offset]
    assert len(closed) == 3
    return committed


def test_crash_at_every_rename_of_the_swap(tmp_path: Path) -> None:
    total = _count_renames(tmp_path / "count")
    assert total >= 12  # per group: 3 commit renames, old segments' renames, 3 final renames
    committed = []
    for k in range(total):
        calls = 0

        def crash_at_k(*args: Any, _k: int = k, _real: Any = os.rename, **kwargs: Any) -> None:
            nonlocal calls
            calls += 1
            if calls == _k + 1:
                raise Crash(f"rename #{_k}")
            _real(*args, **kwargs)

        def inject(mp: pytest.MonkeyPatch, f: Callable[..., None] = crash_at_k) -> None:
            mp.setattr(os, "rename", f)

        committed.append(_crash_and_reopen(tmp_path / f"k{k}", inject))
    # Both sides were exercised: crashes before the commit (rollback) and after it (roll forward).
    assert any(committed) and not all(committed)


def test_crash_while_writing_cleaned_files(tmp_path: Path) -> None:
    def boom(*_: Any) -> None:
        raise Crash("write")

    _crash_and_reopen(tmp_path, lambda mp: mp.setattr(cleaner_rewrite, "_write_all", boom))
    assert not list((tmp_path / "t-0").glob("*.cleaned"))


def test_crash_after_the_swap_before_the_checkpoint(tmp_path: Path) -> None:
    from kafkad.storage import cleaner as cleaner_module

    def boom(*_: Any) -> None:
        raise Crash("checkpoint")

    _crash_and_reopen(tmp_path, lambda mp: mp.setattr(cleaner_module.LogCleaner, "_write_checkpoint", boom))


def test_refused_swap_discards_files_and_keeps_the_log(tmp_path: Path) -> None:
    clock = ManualClock()
    plog, original = _build(tmp_path, clock)
    cleaner = cleaner_for(plog, clock)
    task = cleaner.grab_filthiest()
    assert task is not None
    plog.truncate_to(5)  # a follower truncation races the cleaner
    stats = cleaner.clean(task, cleaner.swap_on_loop)
    assert not stats.completed and stats.groups == 0
    assert cleaner.checkpointed("t", 0) is None
    assert not [p for p in plog.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert read_records(plog) == original[:5]


def test_truncation_of_the_mapped_dirty_section_refuses_the_swap(tmp_path: Path) -> None:
    clock = ManualClock()
    plog = open_compacted(tmp_path, clock, overrides={"segment.bytes": "2048"})
    for r in range(3):  # three closed segments too big to share a group
        produce(plog, clock, keyed(10, 4, tag=f"r{r}-"))
        plog.roll()
    produce(plog, clock, keyed(10, 1, tag="active"))
    third = plog.cleanable_segments()[2][0].base_offset
    cleaner = cleaner_for(plog, clock)
    task = cleaner.grab_filthiest()
    assert task is not None and len(task.dirty) == 3
    plog.truncate_to(third)  # the newest values, which the map would prefer, are gone
    stats = cleaner.clean(task, cleaner.swap_on_loop)
    assert not stats.completed and stats.groups == 0
    kept = latest(read_records(plog))
    assert sorted(v or b"" for _, _, v in kept.values()) == sorted(
        f"r1-3-{k}".encode() for k in range(10)
    )  # every key still has its round-1 value
