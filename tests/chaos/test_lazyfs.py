"""LazyFS (tests/chaos/lazyfs.py) through a real FUSE mount: what a power loss keeps and what it drops.

Each test writes through the mount, cuts the power (`crash` on the control file), remounts with a new
process and looks at what came back. A file system that kept everything (a plain directory) fails each
test that expects a loss; one that dropped everything fails each that expects a survivor."""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.lazyfs import LazyMount

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[LazyMount]:
    with LazyMount(tmp_path / "backing", tmp_path / "mnt") as m:
        yield m


def write(path: Path, data: bytes, *, sync: bool = False, offset: int | None = None) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if offset is None:
            os.pwrite(fd, data, os.fstat(fd).st_size)  # appended
        else:
            os.pwrite(fd, data, offset)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def power_cycle(fs: LazyMount) -> dict[str, object]:
    report = fs.power_loss()
    fs.remount()
    return report


def test_synced_write_kept_unsynced_write_lost(fs: LazyMount) -> None:
    mnt = fs.mountpoint
    write(mnt / "kept", b"a" * 10000, sync=True)
    fsync_dir(mnt)
    write(mnt / "kept", b"b" * 5000)  # appended after the fsync: the partially synced file is cut back
    assert (mnt / "kept").stat().st_size == 15000  # everything is visible before the power loss
    write(mnt / "lost", b"c" * 100)
    fsync_dir(mnt)  # its entry is durable, its data is not
    report = power_cycle(fs)
    assert (mnt / "kept").read_bytes() == b"a" * 10000
    assert (mnt / "lost").read_bytes() == b""
    assert report["bytes_dropped"] == 5000 + 100
    assert (fs.backing / "kept").stat().st_size == 10000  # the backing dir itself holds the durable state


def test_overwrite_and_truncate_inside_the_synced_size_restored(fs: LazyMount) -> None:
    mnt = fs.mountpoint
    write(mnt / "f", b"a" * 3 * 4096, sync=True)
    write(mnt / "g", b"x" * 9000, sync=True)
    fsync_dir(mnt)
    write(mnt / "f", b"B" * 5000, offset=100)  # spans two blocks
    os.truncate(mnt / "g", 10)
    assert (mnt / "f").read_bytes()[100:5100] == b"B" * 5000
    report = power_cycle(fs)
    assert (mnt / "f").read_bytes() == b"a" * 3 * 4096
    assert (mnt / "g").read_bytes() == b"x" * 9000
    assert report["blocks_restored"] == 2 + 3


def test_fdatasync_makes_an_overwrite_durable(fs: LazyMount) -> None:
    mnt = fs.mountpoint
    write(mnt / "f", b"a" * 8192, sync=True)
    fsync_dir(mnt)
    fd = os.open(mnt / "f", os.O_RDWR)
    os.pwrite(fd, b"Z" * 10, 4000)
    os.fdatasync(fd)
    os.close(fd)
    power_cycle(fs)
    assert (mnt / "f").read_bytes() == b"a" * 4000 + b"Z" * 10 + b"a" * 4182


def test_create_without_any_fsync_lost_with_file_or_dir_fsync_kept(fs: LazyMount) -> None:
    mnt = fs.mountpoint
    write(mnt / "never", b"n" * 10)
    write(mnt / "file-synced", b"f" * 10, sync=True)  # fsync of the file commits its entry (ext4)
    (mnt / "d").mkdir()
    write(mnt / "d" / "inner", b"i" * 10)
    fsync_dir(mnt / "d")  # the dir's own entry is committed with it; inner's entry, not its data
    (mnt / "nodir").mkdir()
    report = power_cycle(fs)
    assert sorted(os.listdir(mnt)) == ["d", "file-synced"]
    assert (mnt / "file-synced").read_bytes() == b"f" * 10
    assert (mnt / "d" / "inner").read_bytes() == b""
    assert report["files_removed"] == ["never"] and report["dirs_removed"] == ["nodir"]


def test_new_file_in_a_new_dir_synced_brings_its_dir(fs: LazyMount) -> None:
    mnt = fs.mountpoint
    (mnt / "a" / "b").mkdir(parents=True)
    write(mnt / "a" / "b" / "seg", b"s" * 100, sync=True)
    power_cycle(fs)
    assert (mnt / "a" / "b" / "seg").read_bytes() == b"s" * 100


def test_unlink_not_durable_comes_back_durable_stays_gone(fs: LazyMount) -> None:
    mnt = fs.mountpoint
    (mnt / "d").mkdir()
    write(mnt / "d" / "back", b"b" * 5000, sync=True)
    write(mnt / "d" / "gone", b"g" * 10, sync=True)
    fsync_dir(mnt)
    write(mnt / "d" / "back", b"X" * 10, offset=0)  # changed, then unlinked: the durable bytes come back
    (mnt / "d" / "back").unlink()
    (mnt / "d" / "gone").unlink()
    fsync_dir(mnt / "d")  # makes both unlinks durable...
    write(mnt / "d" / "back", b"new" * 3, sync=True)  # ...then a new file under the old name, synced
    (mnt / "d" / "other").mkdir()
    write(mnt / "d" / "other" / "x", b"1", sync=True)
    (mnt / "d" / "other" / "x").unlink()  # not durable: x comes back
    report = power_cycle(fs)
    assert sorted(os.listdir(mnt / "d")) == ["back", "other"]
    assert (mnt / "d" / "back").read_bytes() == b"new" * 3
    assert (mnt / "d" / "other" / "x").read_bytes() == b"1"
    assert report["entries_restored"] == ["d/other/x"]


def test_rename_durable_only_after_a_fsync(fs: LazyMount) -> None:
    mnt = fs.mountpoint
    (mnt / "x").mkdir()
    for name in ("x/a.tmp", "b.tmp", "target"):
        write(mnt / name, name.encode(), sync=True)
    fsync_dir(mnt)
    os.rename(mnt / "x" / "a.tmp", mnt / "x" / "a")  # x never fsynced again: a.tmp comes back
    os.rename(mnt / "b.tmp", mnt / "target")  # made durable: target holds b.tmp's bytes
    fsync_dir(mnt)
    os.rename(mnt / "target", mnt / "t2")  # not durable again: back to target
    power_cycle(fs)
    assert sorted(os.listdir(mnt)) == ["target", "x"]
    assert os.listdir(mnt / "x") == ["a.tmp"]
    assert (mnt / "target").read_bytes() == b"b.tmp"


def test_dir_rename_moves_its_durable_subtree(fs: LazyMount) -> None:
    mnt = fs.mountpoint
    (mnt / "topic-0").mkdir()
    write(mnt / "topic-0" / "0.log", b"L" * 100, sync=True)
    os.rename(mnt / "topic-0", mnt / "topic-0.deleted")
    fsync_dir(mnt)
    write(mnt / "topic-0.deleted" / "0.log", b"more")  # unsynced append
    power_cycle(fs)
    assert os.listdir(mnt) == ["topic-0.deleted"]
    assert (mnt / "topic-0.deleted" / "0.log").read_bytes() == b"L" * 100


def test_mmap_stores_are_unsynced_until_msync(fs: LazyMount) -> None:
    """kafkad's indexes: a preallocated file written through a MAP_SHARED mapping."""
    mnt = fs.mountpoint
    with open(mnt / "idx", "w+b") as f:
        f.truncate(4 * 4096)
        os.posix_fallocate(f.fileno(), 0, 2 * 4096)
        os.fsync(f.fileno())
        fsync_dir(mnt)
        with mmap.mmap(f.fileno(), 4 * 4096) as mm:
            mm[0:8] = b"synced!!"
            mm.flush()  # msync(MS_SYNC): the write-back and then an fsync reach the file system
            mm[4096:4104] = b"unsynced"
    assert (mnt / "idx").read_bytes()[4096:4104] == b"unsynced"
    power_cycle(fs)
    data = (mnt / "idx").read_bytes()
    assert len(data) == 4 * 4096
    assert data[0:8] == b"synced!!" and data[4096:4104] == b"\0" * 8


def test_after_a_power_loss_everything_fails_until_remounted(fs: LazyMount) -> None:
    mnt = fs.mountpoint
    write(mnt / "f", b"x", sync=True)
    fd = os.open(mnt / "f", os.O_RDWR)
    fs.power_loss()
    with pytest.raises(OSError) as e:
        os.pwrite(fd, b"late", 0)
    assert e.value.errno == errno.EIO
    os.close(fd)
    fs.remount()
    write(mnt / "f", b"y", offset=1, sync=True)
    assert (mnt / "f").read_bytes() == b"xy"
    assert os.statvfs(mnt).f_blocks > 0
