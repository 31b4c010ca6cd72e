"""The fetch baseline: a server that streams files to each client with plain os.sendfile, then closes.

No framing, no requests: the physical limit of "serve these bytes from the page cache over loopback" in
Python. Chunks of --chunk bytes per sendfile call (kafkad's fetch answers are at most a few MiB too).

Run: python -m tests.bench.sendfile_server --port P FILE...
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket


def serve(port: int, paths: list[str], chunk: int) -> None:
    with socket.create_server(("127.0.0.1", port), backlog=16) as srv:
        while True:
            conn, _ = srv.accept()
            # A client that goes away early (the harness's readiness probe) is not an error.
            with conn, contextlib.suppress(BrokenPipeError, ConnectionResetError):
                _stream(conn.fileno(), paths, chunk)


def _stream(out: int, paths: list[str], chunk: int) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            pos = 0
            while pos < size:
                pos += os.sendfile(out, fd, pos, min(chunk, size - pos))
        finally:
            os.close(fd)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--chunk", type=int, default=8 << 20)
    p.add_argument("paths", nargs="+")
    a = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        serve(a.port, a.paths, a.chunk)


if __name__ == "__main__":
    main()
