"""A full file system never kills the broker through an index's mapping (chaos bug 4).

Index files are preallocated sparse and written through mmap; the first store into a page of the sparse
tail makes the file system allocate it, which on a full file system is a SIGBUS: a follower whose tmpfs
log dir was filled (disk-full-follower) died without a line in its log. The entry must be skipped instead
and indexing resume once there is room. Runs in a child process (a SIGBUS there fails the test instead of
killing pytest) on a real 1 MiB tmpfs (root: mount).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.chaos.nemesis import fill, tmpfs

CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import mmap
    from kafkad.storage.offset_index import OffsetIndex
    from kafkad.storage.time_index import TimeIndex

    d = Path(sys.argv[1])
    oi = OffsetIndex(d / "0.index", 0, 256 * 1024)
    ti = TimeIndex(d / "0.timeindex", 0, 256 * 1024)
    PAGE = mmap.PAGESIZE
    per_page = PAGE // 8
    for i in range(per_page // 2):  # the first page of each index gets allocated
        oi.append(i, i * 100)
        ti.maybe_append(1000 + i, i)
    print("filling", flush=True)
    sys.stdin.readline()  # the parent fills the file system
    for i in range(per_page // 2, 2 * per_page):  # crosses into unallocated pages
        oi.append(i, i * 100)
        ti.maybe_append(1000 + i, i)
    full = (oi.entries, ti.entries)
    print("freeing", flush=True)
    sys.stdin.readline()  # the parent removes the ballast
    for i in range(2 * per_page, 3 * per_page):
        oi.append(i, i * 100)
        ti.maybe_append(1000 + i, i)
    assert oi.lookup(3 * per_page - 1) == (3 * per_page - 1, (3 * per_page - 1) * 100)
    print(json.dumps({"full": full, "after": (oi.entries, ti.entries), "page": PAGE}), flush=True)
    oi.close()
    ti.close()
    """
)


def test_index_entries_on_a_full_file_system_are_skipped_not_a_sigbus(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    with tmpfs(tmp_path / "fs", 1 << 20) as fs:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(fs)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        assert child.stdin is not None and child.stdout is not None
        try:
            assert child.stdout.readline().strip() == "filling"
            fill(fs / "ballast")
            child.stdin.write("\n")
            child.stdin.flush()
            line = child.stdout.readline().strip()
            assert line == "freeing", f"child died with {child.wait(10)} (-7 is SIGBUS): {line!r}"
            (fs / "ballast").unlink()
            child.stdin.write("\n")
            child.stdin.flush()
            result = json.loads(child.stdout.readline())
            assert child.wait(30) == 0
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    per_page_oi, per_page_ti = result["page"] // 8, result["page"] // 12
    # full: the entries of the allocated first page were kept, those past it skipped
    assert result["full"][0] == per_page_oi and result["full"][1] <= per_page_ti + 1
    # room again: indexing resumed
    assert result["after"][0] == 2 * per_page_oi
    assert result["after"][1] > result["full"][1]
