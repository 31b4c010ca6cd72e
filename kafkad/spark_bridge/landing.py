"""Landing stores: where the shipper puts segments and where the Spark side reads them back.

Two implementations of one `LandingStore` protocol, both with the same visibility rule: an object
appears under its final name only when complete.

* `FilesystemLanding(root)`: a local or mounted directory. Writes go to a deterministic hidden temp
  file next to the target (`.<name>.tmp`, so a retry overwrites its own leftovers rather than piling up
  new ones), are fsynced, renamed over the target, and the directory is fsynced. The root itself is
  never created: a missing root (an unmounted share) is "unreachable", the shipper backs off and retries
  instead of filling the wrong disk.
* `PyArrowLanding(uri)`: any `pyarrow.fs.FileSystem` (S3, GCS, HDFS, local). On a filesystem,
  writes go to a temp file moved in with `fs.move`. On an object store (`s3://bucket/prefix`) an
  object is written under its final key: a PUT, or a multipart upload completed only on commit, makes
  it appear whole or not at all (a temp object would cost a server-side copy per segment: half the
  shipping throughput). A writer killed mid-upload leaves an incomplete upload, which no listing
  shows (a bucket lifecycle rule `AbortIncompleteMultipartUpload` reclaims its parts); a writer that
  fails is closed and its object deleted; either way the manifest, written after the data, is missing,
  and readers reach data only through manifests. There are no directories there either: a prefix
  exists once an object does, so "the root exists" becomes "the bucket exists" (a HEAD) and, for
  writers, "a probe object can be put and deleted"; no directory marker objects are created by us
  (pyarrow writes one when a delete empties a prefix). Endpoint, region and credentials of S3: see
  `s3.py`.

`open_landing(uri)` picks one: a plain path or `file://` URI gives the filesystem store, anything else
(`s3://bucket/prefix`, `hdfs://...`) goes through pyarrow. Stores pickle to Spark executors as their
URI only (credentials given as settings stay in the process that was given them).

Every store also lists its objects with their sizes (`list_objects`: one listing, which lets the
ingest find a manifest whose `.log` is missing or truncated without reading it), names an object by
its full key for error messages (`key`), and moves damaged objects aside (`move_aside`: the ingest's
`--quarantine`). All methods are blocking (the shipper calls them from its worker thread).
Errors are `OSError`s (pyarrow raises OSError subclasses too): the caller treats them as "unreachable".
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from kafkad.spark_bridge.manifest import MANIFEST_SUFFIX
from kafkad.spark_bridge.s3 import S3Options, bucket_and_root, canonical_uri, is_s3
from kafkad.spark_bridge.s3 import filesystem as s3_filesystem
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

    def list_objects(self) -> dict[str, int]:
        """Relative name -> size of every visible object (hidden temp objects left out)."""
        ...

    def key(self, name: str) -> str:
        """The object's full name, for messages (`s3://bucket/prefix/name`, `/landing/name`)."""
        ...

    def move_aside(self, name: str, dest: str) -> str:
        """Move the object to `dest`/`name` (`dest`: a path or URI in the same filesystem, outside
        the landing); returns the new full name."""
        ...


def _manifests(objects: dict[str, int]) -> list[str]:
    return sorted(n for n in objects if n.endswith(MANIFEST_SUFFIX))


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
        return _manifests(self.list_objects())

    def list_objects(self) -> dict[str, int]:
        root = self.root
        out: dict[str, int] = {}
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                if not f.startswith("."):
                    path = os.path.join(dirpath, f)
                    with contextlib.suppress(FileNotFoundError):
                        out[os.path.relpath(path, root).replace(os.sep, "/")] = os.stat(path).st_size
        return out

    def key(self, name: str) -> str:
        return str(self.root / name)

    def move_aside(self, name: str, dest: str) -> str:
        target = Path(dest[len("file://") :] if dest.startswith("file://") else dest).absolute() / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.root / name, target)
        return str(target)


class _ArrowWriter:
    """Filesystems: a temp file moved in on commit. Object stores: the final key itself, whose
    (multipart) upload completes only on commit; see the module docstring for abort."""

    def __init__(self, fs: Any, target: str, *, object_store: bool) -> None:
        self._fs = fs
        self._target = target
        self._direct = object_store
        self._tmp = target if object_store else _temp_name(target)
        parent = target.rpartition("/")[0]
        if parent and not object_store:
            fs.create_dir(parent, recursive=True)
        self._out: Any = fs.open_output_stream(self._tmp)

    def write(self, data: bytes | memoryview) -> None:
        self._out.write(data)

    def commit(self) -> None:
        self._out.close()  # object stores: completes the upload, the object appears whole
        if not self._direct:
            self._fs.move(self._tmp, self._target)

    def abort(self) -> None:
        # pyarrow cannot abort an upload (closing completes it, and so does dropping the stream):
        # what was written is closed and deleted. On an object store it was under the final name,
        # but with no manifest yet (written after the data), so no reader takes it meanwhile.
        with contextlib.suppress(OSError):
            self._out.close()
        with contextlib.suppress(OSError):
            self._fs.delete_file(self._tmp)


_OBJECT_STORES = ("s3", "gcs")
PROBE_NAME = ".kafkad-write-probe"


class PyArrowLanding:
    """A landing area on any pyarrow filesystem; the URI's path is the root (bucket/prefix for S3)."""

    def __init__(self, uri: str, s3: S3Options | None = None) -> None:
        self._s3_options = s3  # not pickled: executors use their own credential chain
        self._uri = canonical_uri(uri, s3) if is_s3(uri) else uri
        self._fs_cache: Any = None
        self._root = ""
        self._object_store = False
        self._writable_checked = False

    def _fs(self) -> Any:
        if self._fs_cache is None:
            from pyarrow import fs as pafs

            if is_s3(self._uri):
                self._fs_cache = s3_filesystem(self._uri, self._s3_options)
                self._root = bucket_and_root(self._uri)[1]
            else:
                self._fs_cache, root = pafs.FileSystem.from_uri(self._uri)
                self._root = root.rstrip("/")
            self._object_store = self._fs_cache.type_name in _OBJECT_STORES
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
        return f"{self._root}/{name}" if self._root and name else name or self._root

    def key(self, name: str) -> str:
        scheme = self._uri.split("://", 1)[0]
        self._fs()
        return f"{scheme}://{self._path(name)}"

    def check(self, *, writable: bool = True) -> None:
        from pyarrow import fs as pafs

        fs = self._fs()
        if not self._object_store:
            if fs.get_file_info(self._root or "/").type != pafs.FileType.Directory:
                raise FileNotFoundError(f"landing root {self._uri} is missing")
            return
        if self._writable_checked:
            return  # once per store: later writes fail by themselves, and cost no HEAD each
        bucket = self._root.split("/", 1)[0]
        if fs.get_file_info(bucket).type != pafs.FileType.Directory:
            raise FileNotFoundError(
                f"bucket {bucket} of landing {self.key('')} does not exist (or these credentials cannot see it)"
            )
        if writable and not self._writable_checked:
            probe = self._path(PROBE_NAME)
            try:
                with fs.open_output_stream(probe) as out:
                    out.write(b"kafkad")
                fs.delete_file(probe)
            except OSError as e:
                raise PermissionError(f"landing {self.key('')} is not writable: {e}") from e
            self._writable_checked = True

    def open_writer(self, name: str) -> LandingWriter:
        self.check()
        return _ArrowWriter(self._fs(), self._path(name), object_store=self._object_store)

    def put_bytes(self, name: str, data: bytes) -> None:
        self.check()
        if self._object_store:  # one PUT: the object appears whole or not at all
            with self._fs().open_output_stream(self._path(name)) as out:
                out.write(data)
            return
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
        return _manifests(self.list_objects())

    def list_objects(self) -> dict[str, int]:
        from pyarrow import fs as pafs

        fs = self._fs()
        infos = fs.get_file_info(pafs.FileSelector(self._root or "/", recursive=True, allow_not_found=True))
        prefix = f"{self._root}/" if self._root else ""
        return {
            i.path[len(prefix) :]: i.size
            for i in infos
            if i.type == pafs.FileType.File and not i.base_name.startswith(".")
        }

    def move_aside(self, name: str, dest: str) -> str:
        fs = self._fs()
        scheme = self._uri.split("://", 1)[0]
        if not dest.startswith(f"{scheme}://"):
            raise ValueError(f"{dest}: must be a {scheme}:// location (the landing's filesystem)")
        target = f"{dest[len(scheme) + 3 :].split('?', 1)[0].rstrip('/')}/{name}"
        fs.move(self._path(name), target)
        return f"{scheme}://{target}"


def open_landing(uri: str, s3: S3Options | None = None) -> LandingStore:
    """The store for `bridge.landing.dir` / `--landing`: a path or file:// URI, else a pyarrow URI
    (`s3` overrides the AWS chain for s3:// URIs)."""
    if uri.startswith("file://"):
        return FilesystemLanding(uri[len("file://") :])
    if "://" not in uri:
        return FilesystemLanding(uri)
    return PyArrowLanding(uri, s3)
