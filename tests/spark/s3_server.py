"""A real S3 endpoint for the bridge tests: moto's server on 127.0.0.1, and a TCP proxy that fails requests.

`MotoS3` runs moto's S3 server in this process (`ThreadedMotoServer`) on a free loopback port; its
objects live in moto's in-process backend, so `stop()` then `start()` (same port) is an endpoint
that goes down and comes back with its data. `FlakyProxy` forwards a loopback port to it and kills a
fraction of the requests (closes both sides of the connection as a request passes), seeded, so a
run is reproducible; `down` makes it refuse every connection.

`STATIC_ENV` is what a user sets for the standard AWS chain; tests put it into `os.environ` at import
(the session's Spark workers inherit the environment the JVM started with) and add `AWS_ENDPOINT_URL`.
"""

from __future__ import annotations

import contextlib
import logging
import random
import selectors
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from moto.server import ThreadedMotoServer

STATIC_ENV = {
    "AWS_ACCESS_KEY_ID": "kafkad-test",
    "AWS_SECRET_ACCESS_KEY": "kafkad-test-secret",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # never wait for an instance-metadata endpoint
}

logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class MotoS3:
    def __init__(self) -> None:
        self.port = free_port()
        self._server: ThreadedMotoServer | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def create_bucket(self, prefix: str = "bars") -> str:
        """A new bucket (moto's state is per process: each test takes its own)."""
        import boto3  # type: ignore[import-untyped]

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        client = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=name)
        return name

    def client(self) -> object:
        import boto3  # type: ignore[import-untyped]

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")


@contextmanager
def moto_s3() -> Iterator[MotoS3]:
    server = MotoS3()
    server.start()
    try:
        yield server
    finally:
        server.stop()


_METHODS = (b"GET ", b"PUT ", b"POST ", b"HEAD ", b"DELETE ")


class FlakyProxy:
    """127.0.0.1:<port> -> the target; each HTTP request (a client chunk opening with a method; clients
    do not pipeline) is killed with `fail_ratio`, as its first bytes pass."""

    def __init__(self, target_port: int, fail_ratio: float, seed: int = 22) -> None:
        self.target_port = target_port
        self.fail_ratio = fail_ratio
        self.down = False
        self.killed = 0
        self.requests = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._open: set[socket.socket] = set()  # clients' connections being piped
        threading.Thread(target=self._accept, daemon=True, name="flaky-proxy").start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self._sock.close()

    def go_down(self) -> None:
        """The endpoint is gone: new connections are refused and the open ones cut at once (a pooled
        keep-alive connection must not carry a request through the outage)."""
        self.down = True
        with self._lock:
            for c in list(self._open):
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)

    def _fail(self) -> bool:
        with self._lock:
            self.requests += 1
            if self._rng.random() < self.fail_ratio:
                self.killed += 1
                return True
            return False

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=30)
        except OSError:
            client.close()
            return
        socks = [client, upstream]
        with self._lock:
            self._open.add(client)
        # selectors (epoll), not select.select: in a long test process descriptors pass 1024, where
        # select() raises ValueError and every piped connection died at its first request
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        try:
            while not self._stop.is_set() and not self.down:
                for key, _ in sel.select(0.5):
                    s = key.fileobj
                    assert isinstance(s, socket.socket)
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client and data.startswith(_METHODS) and self._fail():
                        return  # the request dies mid-way: the client sees a reset connection
                    (upstream if s is client else client).sendall(data)
        except OSError:
            return
        finally:
            sel.close()
            with self._lock:
                self._open.discard(client)
            for s in socks:
                s.close()
