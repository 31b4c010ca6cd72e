"""LazyFS: a FUSE file system over a real directory that forgets what was not fsynced when the power goes.

Like Jepsen's LazyFS, in Python (mfusepy over Debian's libfuse3). Every operation goes straight to the
backing directory (reads see the latest data, as through a page cache), and the file system keeps apart
what a power loss would take away on Linux ext4 (data=ordered):

- file data: per file, the size at its last fsync/fdatasync (`synced_size`) and the durable content of
  every 4 KiB block inside it that was overwritten or truncated away since (saved before the change);
- directory entries: a durable namespace (path -> file/dir id) beside the current one. A create, mkdir,
  unlink, rmdir or rename becomes durable when its directory is fsynced, or (ext4 commits the journal
  transaction that holds it) when the file itself is fsynced (fsync of a file also makes its own entry and
  its missing ancestors durable). A rename is atomic: never both names, the old one until it is durable.
  A dir rename moves its durable subtree with it. Hard links are refused (EPERM), kafkad makes none.

`power loss` (write `crash` to `/.lazyfs` at the mount root; the write returns when it is done): every
durable file gets its durable content back (truncated to `synced_size`, saved blocks written back), files
and dirs whose entries never became durable are removed, unlinked/renamed entries come back under their
durable names; then every operation fails with EIO (a powered-off disk: the late write-back of a killed
process' dirty mmap pages is dropped too) until the file system is unmounted and mounted again by a new
process, which takes whatever the backing directory holds as durable. What was dropped is written to
`<state>/last-crash.json`. The backing directory itself is never fsynced: the power loss is simulated.

Not modelled: torn writes inside a block (a block is all old or all new), reordering of data and metadata
beyond the above, xattrs, symlinks, hard links.

mmap: files open without direct_io (the kernel page cache is used), so kafkad's MAP_SHARED indexes work;
their stores reach `write` through the kernel's write-back (at msync/fsync, at close, or later) and count
as unsynced like any write. `fallocate` (mode 0: posix_fallocate) grows the file; other modes: EOPNOTSUPP.

Run: `python -m tests.chaos.lazyfs BACKING STATE MOUNTPOINT` (foreground; exits when unmounted).
`LazyMount` starts and controls one from a test.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 4096
CTL = "/.lazyfs"
log = logging.getLogger("lazyfs")


def _err(code: int) -> OSError:
    return OSError(code, os.strerror(code))


@dataclass
class FileState:
    synced_size: int
    saved: dict[int, bytes] = field(default_factory=dict)  # block -> durable bytes before the change


class Model:
    """The durability bookkeeping over a backing directory (no FUSE in here); every method holds the lock.

    Paths are relative to the mount root ("" is the root, "a/b" below it). `cur` mirrors the backing tree
    (path -> id), `dur` is what survives a power loss. File ids map to FileState; unlinked files still
    durable somewhere keep their data in `<state>/trash/<id>`.
    """

    def __init__(self, backing: Path, state: Path) -> None:
        self.backing = backing
        self.state = state
        self.trash = state / "trash"
        self.stage = state / "stage"
        for d in (self.trash, self.stage):
            shutil.rmtree(d, ignore_errors=True)  # a clean unmount left nothing worth keeping
            d.mkdir(parents=True)
        self.lock = threading.RLock()
        self.next_id = 1
        self.cur: dict[str, int] = {}
        self.dirs: set[int] = set()
        self.files: dict[int, FileState] = {}
        self.crashed = False
        self._scan()
        self.dur: dict[str, int] = dict(self.cur)

    # --- ids and paths ---------------------------------------------------------------------------
    def _new_id(self) -> int:
        i = self.next_id
        self.next_id += 1
        return i

    def _scan(self) -> None:
        self.cur[""] = root = self._new_id()
        self.dirs.add(root)
        for top, dnames, fnames in os.walk(self.backing):
            rel = os.path.relpath(top, self.backing)
            rel = "" if rel == "." else rel
            for d in dnames:
                i = self._new_id()
                self.cur[_join(rel, d)] = i
                self.dirs.add(i)
            for f in fnames:
                i = self._new_id()
                self.cur[_join(rel, f)] = i
                self.files[i] = FileState(os.lstat(self.backing / rel / f).st_size)

    def real(self, path: str) -> Path:
        return self.backing / path if path else self.backing

    def path_of(self, ns: dict[str, int], i: int) -> str | None:
        for p, j in ns.items():
            if j == i:
                return p
        return None

    def check(self) -> None:
        if self.crashed:
            raise _err(errno.EIO)

    # --- data ------------------------------------------------------------------------------------
    def before_write(self, fid: int, fd: int, offset: int, end: int) -> None:
        """Save the durable content of the blocks in [offset, end) inside the synced size."""
        st = self.files.get(fid)
        if st is None or offset >= st.synced_size:
            return
        end = min(end, st.synced_size)
        for b in range(offset // BLOCK, (end + BLOCK - 1) // BLOCK):
            if b not in st.saved:
                n = min(BLOCK, st.synced_size - b * BLOCK)
                data = os.pread(fd, n, b * BLOCK)
                st.saved[b] = data + b"\0" * (n - len(data))

    def synced(self, fid: int, fd: int) -> None:
        """fsync/fdatasync: the file's data and its own entry (with missing ancestors) become durable."""
        st = self.files.get(fid)
        if st is not None:
            st.synced_size = os.fstat(fd).st_size
            st.saved.clear()
        p = self.path_of(self.cur, fid)
        if p is None:
            return  # unlinked while open: its data is durable only if an entry still is
        self._sync_entry(p, fid)
        parent = os.path.dirname(p)
        while parent:
            if parent not in self.dur:
                self._sync_entry(parent, self.cur[parent])
            parent = os.path.dirname(parent)

    def _sync_entry(self, path: str, i: int) -> None:
        """Make `path -> i` durable: an id durable elsewhere moves (atomic rename, subtree included)."""
        old = self.path_of(self.dur, i)
        if old == path:
            return
        if path in self.dur:
            self._drop_dur(path)  # whatever the new name replaced is gone (a replaced dir: its subtree)
        if old is None:
            self.dur[path] = i
            return
        for p in [p for p in self.dur if p == old or p.startswith(old + "/")]:
            self.dur[path + p[len(old) :]] = self.dur.pop(p)

    def _drop_dur(self, path: str) -> None:
        for p in [p for p in self.dur if p == path or p.startswith(path + "/")]:
            del self.dur[p]

    def synced_dir(self, path: str) -> None:
        """fsync of a directory: its entries (creations, removals, renames in or out) become durable."""
        if path not in self.cur:
            return  # removed while open
        if path not in self.dur:  # a new dir fsynced: ext4 commits its own entry with it
            self._sync_entry(path, self.cur[path])
        cur_children = {p: i for p, i in self.cur.items() if p and os.path.dirname(p) == path}
        for p, i in list(self.dur.items()):
            if p and os.path.dirname(p) == path and p not in cur_children and p in self.dur:
                if self.path_of(self.cur, i) is not None:
                    self._sync_entry(self.path_of(self.cur, i) or "", i)  # renamed out of this dir
                else:
                    self._drop_dur(p)  # unlinked / removed
        for p, i in cur_children.items():
            self._sync_entry(p, i)
        self._collect()

    # --- namespace -------------------------------------------------------------------------------
    def created(self, path: str, *, directory: bool) -> None:
        i = self._new_id()
        self.cur[path] = i
        if directory:
            self.dirs.add(i)
        else:
            self.files[i] = FileState(0)

    def removing(self, path: str) -> None:
        """Before the backing entry at `path` goes (unlink, rmdir, replaced by a rename): a file that is
        still durable somewhere keeps its data in the trash."""
        i = self.cur.pop(path)
        if i in self.dirs:
            return
        if self.path_of(self.dur, i) is not None:
            os.rename(self.real(path), self.trash / str(i))

    def renamed(self, old: str, new: str) -> None:
        for p in [p for p in self.cur if p == old or p.startswith(old + "/")]:
            self.cur[new + p[len(old) :]] = self.cur.pop(p)

    def _collect(self) -> None:
        """Forget files in neither namespace (their trash copy goes too)."""
        live = set(self.cur.values()) | set(self.dur.values())
        for i in [i for i in self.files if i not in live]:
            del self.files[i]
            (self.trash / str(i)).unlink(missing_ok=True)

    # --- power loss ------------------------------------------------------------------------------
    def power_loss(self) -> dict[str, Any]:
        """Put the backing directory in its durable state; then refuse everything (see the docstring)."""
        report: dict[str, Any] = {"bytes_dropped": 0, "blocks_restored": 0, "files_removed": [],
                                  "dirs_removed": [], "entries_restored": []}  # fmt: skip
        cur_path = {i: p for p, i in self.cur.items()}
        # 1. durable content of every durable file, moved to the stage
        for p, i in self.dur.items():
            if i in self.dirs:
                continue
            src = self.real(cur_path[i]) if i in cur_path else self.trash / str(i)
            st = self.files[i]
            size = os.lstat(src).st_size
            report["bytes_dropped"] += max(0, size - st.synced_size)
            os.truncate(src, st.synced_size)
            if st.saved:
                fd = os.open(src, os.O_WRONLY)
                try:
                    for b, data in st.saved.items():
                        os.pwrite(fd, data, b * BLOCK)
                finally:
                    os.close(fd)
                report["blocks_restored"] += len(st.saved)
            if cur_path.get(i) != p:
                report["entries_restored"].append(p)
            os.rename(src, self.stage / str(i))
        # 2. what is left in the tree never became durable
        dur_paths = set(self.dur)
        for p, i in sorted(self.cur.items(), key=lambda x: -x[0].count("/")):
            if not p:
                continue
            if i in self.dirs:
                if p not in dur_paths:
                    report["dirs_removed"].append(p)
                    shutil.rmtree(self.real(p), ignore_errors=True)
            elif i not in self.dur.values() and os.path.lexists(self.real(p)):
                report["files_removed"].append(p)
                report["bytes_dropped"] += os.lstat(self.real(p)).st_size
                os.unlink(self.real(p))
        for top, dnames, fnames in os.walk(self.backing, topdown=False):  # under renamed dirs
            rel = os.path.relpath(top, self.backing)
            rel = "" if rel == "." else rel
            for f in fnames:
                os.unlink(os.path.join(top, f))
            for d in dnames:
                if _join(rel, d) not in dur_paths:
                    shutil.rmtree(os.path.join(top, d), ignore_errors=True)
        # 3. the durable tree
        for p, i in sorted(self.dur.items(), key=lambda x: x[0].count("/")):
            if p and i in self.dirs:
                self.real(p).mkdir(parents=True, exist_ok=True)
        for p, i in self.dur.items():
            if i not in self.dirs:
                self.real(p).parent.mkdir(parents=True, exist_ok=True)
                os.rename(self.stage / str(i), self.real(p))
        shutil.rmtree(self.trash, ignore_errors=True)
        self.crashed = True
        report["files_removed"].sort()
        return report


def summary(report: dict[str, Any]) -> dict[str, int]:
    """A power loss' report in counts (its lists name every file)."""
    return {k: v if isinstance(v, int) else len(v) for k, v in report.items()}


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a else b


def _rel(path: str | None) -> str:
    assert path is not None and path.startswith("/"), path
    return path.strip("/")


class LazyFS:
    """The FUSE operations (mfusepy's high-level API); file handles are fds on the backing files."""

    use_ns = True
    flag_nullpath_ok = True
    flag_nopath = True

    def __init__(self, model: Model) -> None:
        self.m = model
        self.fids: dict[int, int] = {}  # fh (backing fd) -> file id
        self.dir_handles: dict[int, int] = {}  # opendir handle -> dir id
        self.next_dir_handle = 1 << 40  # never a backing fd

    # --- attributes ------------------------------------------------------------------------------
    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        if path == CTL:
            now = time.time_ns()
            return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": 0, "st_mtime": now,
                    "st_atime": now, "st_ctime": now}  # fmt: skip
        with self.m.lock:
            self.m.check()
            st = os.fstat(fh) if fh is not None and fh in self.fids else os.lstat(self.m.real(_rel(path)))
        keys = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_blocks", "st_ino")
        out: dict[str, Any] = {k: getattr(st, k) for k in keys}
        out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return out

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self.m.backing)
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail")
        return {k: getattr(sv, k) for k in keys} | {"f_namemax": sv.f_namemax}

    def chmod(self, path: str | None, mode: int) -> int:
        with self.m.lock:
            self.m.check()
            os.chmod(self.m.real(_rel(path)), mode)
        return 0

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        with self.m.lock:
            self.m.check()
            os.chown(self.m.real(_rel(path)), uid, gid)
        return 0

    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        with self.m.lock:
            self.m.check()
            os.utime(self.m.real(_rel(path)), ns=times) if times else os.utime(self.m.real(_rel(path)))
        return 0

    # --- directories -----------------------------------------------------------------------------
    def _dir(self, path: str | None, fh: int) -> str:
        """The current path of an open dir (with flag_nopath, libfuse passes no path with a handle)."""
        i = self.dir_handles.get(fh)
        p = self.m.path_of(self.m.cur, i) if i is not None else None
        if p is None:
            if path is None:
                raise _err(errno.ENOENT)
            p = _rel(path)
        return p

    def readdir(self, path: str | None, fh: int) -> Iterator[str]:
        with self.m.lock:
            self.m.check()
            names = os.listdir(self.m.real(self._dir(path, fh)))
        yield from [".", "..", *names]

    def opendir(self, path: str) -> int:
        with self.m.lock:
            self.m.check()
            p = _rel(path)
            if p not in self.m.cur or self.m.cur[p] not in self.m.dirs:
                raise _err(errno.ENOTDIR)
            self.next_dir_handle += 1
            self.dir_handles[self.next_dir_handle] = self.m.cur[p]
            return self.next_dir_handle

    def releasedir(self, path: str | None, fh: int) -> int:
        self.dir_handles.pop(fh, None)
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self.m.lock:
            self.m.check()
            self.m.synced_dir(self._dir(path, fh))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        with self.m.lock:
            self.m.check()
            os.mkdir(self.m.real(_rel(path)), mode)
            self.m.created(_rel(path), directory=True)
        return 0

    def rmdir(self, path: str) -> int:
        with self.m.lock:
            self.m.check()
            os.rmdir(self.m.real(_rel(path)))
            self.m.removing(_rel(path))
        return 0

    def unlink(self, path: str) -> int:
        with self.m.lock:
            self.m.check()
            p = _rel(path)
            if not os.path.lexists(self.m.real(p)):
                raise _err(errno.ENOENT)
            self.m.removing(p)  # moved to the trash while still durable somewhere
            if os.path.lexists(self.m.real(p)):
                os.unlink(self.m.real(p))
            self.m._collect()
        return 0

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        with self.m.lock:
            self.m.check()
            o, n = _rel(old), _rel(new)
            if not os.path.lexists(self.m.real(o)):
                raise _err(errno.ENOENT)
            if o == n:
                return 0
            if flags:
                raise _err(errno.EINVAL)
            if n in self.m.cur:
                if self.m.cur[n] in self.m.dirs:
                    os.rmdir(self.m.real(n))  # must be empty, as rename(2) requires
                self.m.removing(n)
            os.rename(self.m.real(o), self.m.real(n))
            self.m.renamed(o, n)
            self.m._collect()
        return 0

    def link(self, target: str, source: str) -> int:
        raise _err(errno.EPERM)

    def symlink(self, target: str, source: str) -> int:
        raise _err(errno.EPERM)

    # --- files -----------------------------------------------------------------------------------
    def create(self, path: str, mode: int, fi: Any = None) -> int:
        with self.m.lock:
            self.m.check()
            p = _rel(path)
            existed = p in self.m.cur
            fd = os.open(self.m.real(p), os.O_RDWR | os.O_CREAT, mode)
            if not existed:
                self.m.created(p, directory=False)
            self.fids[fd] = self.m.cur[p]
        return fd

    def open(self, path: str, flags: int) -> int:
        if path == CTL:
            return 0  # fd 0 is never one of ours: the control file
        with self.m.lock:
            self.m.check()
            p = _rel(path)
            fd = os.open(self.m.real(p), os.O_RDWR if os.access(self.m.real(p), os.W_OK) else os.O_RDONLY)
            self.fids[fd] = self.m.cur[p]
            if flags & os.O_TRUNC:
                self.m.before_write(self.fids[fd], fd, 0, 1 << 62)
                os.ftruncate(fd, 0)
        return fd

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self.m.lock:
            self.m.check()
            return os.pread(fh, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        if fh == 0:
            return self._control(data)
        with self.m.lock:
            self.m.check()
            self.m.before_write(self.fids[fh], fh, offset, offset + len(data))
            return os.pwrite(fh, data, offset)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        if path == CTL:
            return 0
        with self.m.lock:
            self.m.check()
            if fh is None or fh not in self.fids:
                p = _rel(path)
                fd = os.open(self.m.real(p), os.O_RDWR)
                try:
                    self.m.before_write(self.m.cur[p], fd, length, 1 << 62)
                    os.ftruncate(fd, length)
                finally:
                    os.close(fd)
            else:
                self.m.before_write(self.fids[fh], fh, length, 1 << 62)
                os.ftruncate(fh, length)
        return 0

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        if mode != 0:
            raise _err(errno.EOPNOTSUPP)
        with self.m.lock:
            self.m.check()
            os.posix_fallocate(fh, offset, size)  # grows the file; the old content stays as it was
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        if fh == 0:
            return 0
        with self.m.lock:
            self.m.check()
            self.m.synced(self.fids[fh], fh)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0

    def release(self, path: str | None, fh: int) -> int:
        if fh == 0:
            return 0
        with self.m.lock:
            if self.fids.pop(fh, None) is not None:
                os.close(fh)
        return 0

    # --- power loss ------------------------------------------------------------------------------
    def _control(self, data: bytes) -> int:
        cmd = data.decode().strip()
        if cmd != "crash":
            raise _err(errno.EINVAL)
        with self.m.lock:
            self.m.check()
            for fd in self.fids:
                os.close(fd)
            self.fids.clear()
            report = self.m.power_loss()
        (self.m.state / "last-crash.json").write_text(json.dumps(report))
        log.warning("power loss: %s", summary(report))
        return len(data)


def serve(backing: Path, state: Path, mountpoint: Path) -> None:
    import mfusepy

    class Fuse(mfusepy.FUSE):  # type: ignore[misc]
        def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
            # mfusepy 3.1 drops the handle of an ftruncate; with flag_nopath it is all there is
            fh = fip.contents.fh if fip else None
            return int(self.operations.truncate(None if path is None else path.decode(), length, fh))

    model = Model(backing, state)
    Fuse(LazyFS(model), str(mountpoint), foreground=True, nothreads=True, hard_remove=True,
                 fsname="lazyfs", subtype="lazyfs")  # fmt: skip


class LazyMount:
    """One LazyFS process (`backing` -> `mountpoint`, bookkeeping in `state`); a context manager.

    power_loss(): drop what is not durable (the fs refuses everything after it); remount(): unmount and
    start a fresh process over the same backing dir. Processes using the mount must be dead (kill -9)
    before a power loss, or their later writes fail with EIO.
    """

    def __init__(
        self, backing: Path, mountpoint: Path, state: Path | None = None, log_path: Path | None = None
    ):
        self.backing = backing
        self.mountpoint = mountpoint
        self.state = state or backing.parent / f"{backing.name}.lazyfs"
        self.log_path = log_path or self.state.parent / f"{self.state.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.power_losses: list[dict[str, Any]] = []

    def mount(self, timeout_s: float = 30.0) -> None:
        for d in (self.backing, self.mountpoint, self.state):
            d.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as lg:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.lazyfs", str(self.backing), str(self.state),
                 str(self.mountpoint)],
                stdin=subprocess.DEVNULL, stdout=lg, stderr=subprocess.STDOUT,
                cwd=Path(__file__).resolve().parents[2],
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while not os.path.ismount(self.mountpoint):
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"lazyfs exited with {self.proc.returncode}: {self.log_path.read_text()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"lazyfs not mounted at {self.mountpoint} in {timeout_s}s")
            time.sleep(0.02)

    def power_loss(self) -> dict[str, Any]:
        fd = os.open(self.mountpoint / CTL.lstrip("/"), os.O_WRONLY)
        try:
            os.write(fd, b"crash")
        finally:
            os.close(fd)
        report: dict[str, Any] = json.loads((self.state / "last-crash.json").read_text())
        self.power_losses.append(report)
        return report

    def unmount(self, timeout_s: float = 30.0) -> None:
        if self.proc is None:
            return
        if subprocess.run(["fusermount3", "-u", str(self.mountpoint)], capture_output=True).returncode != 0:
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], capture_output=True)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def remount(self) -> None:
        self.unmount()
        self.mount()

    def __enter__(self) -> LazyMount:
        self.mount()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unmount()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="lazyfs", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("backing", type=Path)
    ap.add_argument("state", type=Path)
    ap.add_argument("mountpoint", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(args.backing, args.state, args.mountpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
