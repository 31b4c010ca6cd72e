"""Landing stores: where the shipper puts segments and where the Spark side reads them back.

Two implementations of one `LandingStore` protocol, both with the same visibility rule: an object
appears under its final name only when complete.

* `FilesystemLanding(root)`: a local or mounted directory. Writes go to a deterministic hidden temp
  file next to the target (`.<name>.tmp`, so a retry overwrites its own leftovers rather than piling up
  new ones), are fsynced, renamed over the target, and the directory is fsynced. The root itself is
  never created: a missing root (an unmounted share) is "unreachable", the shipper backs off and retries
  instead of filling the wrong disk.
* `PyArrowLanding(fs, root)`: any `pyarrow.fs.FileSystem` (S3, GCS, HDFS, local). Writes go to a temp
  object and are moved in with `fs.move` (a rename on HDFS/local; copy + delete on object stores, where
  the copy appears atomically).

`open_landing(uri)` picks one: a plain path or `file://` URI gives the filesystem store, anything else
(`s3://bucket/prefix`, `hdfs://...`) goes through pyarrow. Store objects hold only strings, so they
pickle to Spark executors. All methods are blocking (the shipper calls them from its worker thread).
Errors are `OSError`s (pyarrow raises OSError subclasses too): the caller treats them as "unreachable".
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from kafkad.spark_bridge.manifest import MANIFEST_SUFFIX
from kafkad.storage.checkpoints import fsync_dir

_TEMP_SUFFIX = ".tmp"


class LandingWriter(Protocol):
    def write(self, data: bytes | memoryview) -> None: ...
    def commit(self) -> None:
        """Make the object visible under its final name (atomically)."""
        ...

    def abort(self) -> None:
        """Drop what was written; the final name is untouched."""
        ...


class LandingStore(Protocol):
    @property
    def uri(self) -> str: ...
    def check(self, *, writable: bool = True) -> None:
        """Raise OSError if the store is unreachable (e.g. its root is missing), or read-only when
        `writable` (the ingest job only reads)."""
        ...

    def open_writer(self, name: str) -> LandingWriter: ...
    def put_bytes(self, name: str, data: bytes) -> None: ...
    def read_bytes(self, name: str) -> bytes | None:
        """The object's bytes, None if it does not exist."""
        ...

    def open_read(self, name: str) -> BinaryIO: ...
    def list_manifests(self) -> list[str]:
        """Relative names of every manifest in the store, sorted."""
        ...


def _temp_name(path: str) -> str:
    head, _, tail = path.rpartition("/")
    return f"{head}/.{tail}{_TEMP_SUFFIX}" if head else f".{tail}{_TEMP_SUFFIX}"


def _write_all(writer: LandingWriter, data: bytes) -> None:
    """Writes `data` and commits it, or aborts the writer (nothing lands) if anything fails."""
    try:
        writer.write(data)
        writer.commit()
    except BaseException:
        writer.abort()
        raise


class _FileWriter:
    def __init__(self, target: Path) -> None:
        self._target = target
        self._tmp = Path(_temp_name(str(target)))
        target.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def commit(self) -> None:
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1
        os.replace(self._tmp, self._target)
        fsync_dir(self._target.parent)

    def abort(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(OSError):
            self._tmp.unlink()


class FilesystemLanding:
    """A landing directory on a local or mounted filesystem."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = str(Path(root).absolute())

    @property
    def uri(self) -> str:
        return self._root

    @property
    def root(self) -> Path:
        return Path(self._root)

    def check(self, *, writable: bool = True) -> None:
        if not os.path.isdir(self._root):
            raise FileNotFoundError(f"landing dir {self._root} is missing")
        if writable and not os.access(self._root, os.W_OK):
            raise PermissionError(f"landing dir {self._root} is not writable")

    def open_writer(self, name: str) -> LandingWriter:
        self.check()
        return _FileWriter(self.root / name)

    def put_bytes(self, name: str, data: bytes) -> None:
        _write_all(self.open_writer(name), data)

    def read_bytes(self, name: str) -> bytes | None:
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return None

    def open_read(self, name: str) -> BinaryIO:
        return open(self.root / name, "rb")

    def list_manifests(self) -> list[str]:
        root = self.root
        out: list[str] = []
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                if f.endswith(MANIFEST_SUFFIX) and not f.startswith("."):
                    out.append(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
        return sorted(out)


class _ArrowWriter:
    def __init__(self, fs: Any, target: str) -> None:
        self._fs = fs
        self._target = target
        self._tmp = _temp_name(target)
        parent = target.rpartition("/")[0]
        if parent:
            fs.create_dir(parent, recursive=True)
        self._out: Any = fs.open_output_stream(self._tmp)

    def write(self, data: bytes | memoryview) -> None:
        self._out.write(data)

    def commit(self) -> None:
        self._out.close()
        self._fs.move(self._tmp, self._target)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._out.close()
            self._fs.delete_file(self._tmp)


class PyArrowLanding:
    """A landing area on any pyarrow filesystem; `root` is a path inside it (bucket/prefix for S3)."""

    def __init__(self, uri: str) -> None:
        self._uri = uri
        self._fs_cache: Any = None
        self._root = ""

    def _fs(self) -> Any:
        if self._fs_cache is None:
            from pyarrow import fs as pafs

            self._fs_cache, self._root = pafs.FileSystem.from_uri(self._uri)
            self._root = self._root.rstrip("/")
        return self._fs_cache

    def __getstate__(self) -> dict[str, Any]:
        return {"uri": self._uri}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["uri"])  # type: ignore[misc]

    @property
    def uri(self) -> str:
        return self._uri

    def _path(self, name: str) -> str:
        self._fs()
        return f"{self._root}/{name}" if self._root else name

    def check(self, *, writable: bool = True) -> None:
        from pyarrow import fs as pafs

        info = self._fs().get_file_info(self._root or "/")
        if info.type != pafs.FileType.Directory:
            raise FileNotFoundError(f"landing root {self._uri} is missing")

    def open_writer(self, name: str) -> LandingWriter:
        self.check()
        return _ArrowWriter(self._fs(), self._path(name))

    def put_bytes(self, name: str, data: bytes) -> None:
        _write_all(self.open_writer(name), data)

    def read_bytes(self, name: str) -> bytes | None:
        try:
            with self._fs().open_input_stream(self._path(name)) as f:
                return bytes(f.read())
        except FileNotFoundError:
            return None

    def open_read(self, name: str) -> BinaryIO:
        f: BinaryIO = self._fs().open_input_file(self._path(name))
        return f

    def list_manifests(self) -> list[str]:
        from pyarrow import fs as pafs

        fs = self._fs()
        infos = fs.get_file_info(pafs.FileSelector(self._root or "/", recursive=True, allow_not_found=True))
        prefix = f"{self._root}/" if self._root else ""
        out = [
            i.path[len(prefix) :]
            for i in infos
            if i.type == pafs.FileType.File
            and i.base_name.endswith(MANIFEST_SUFFIX)
            and not i.base_name.startswith(".")
        ]
        return sorted(out)


def open_landing(uri: str) -> LandingStore:
    """The store for `bridge.landing.dir` / `--landing`: a path or file:// URI, else a pyarrow URI."""
    if uri.startswith("file://"):
        return FilesystemLanding(uri[len("file://") :])
    if "://" not in uri:
        return FilesystemLanding(uri)
    return PyArrowLanding(uri)
