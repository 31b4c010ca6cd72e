"""An in-memory stand-in for kafkad.zk.client.ZkClient, for driving the controller in unit tests.

Same interface and semantics as the real client where the controller relies on them: versions, ephemeral
nodes owned by the session, one-shot data/child watches delivered on the loop, all-or-nothing multi with
kazoo's exceptions. `expire_session()` does what kazoo does on expiry: the session's ephemerals go, every
pending watch is called once with the path-less NONE event and dropped, listeners hear LOST, and every call
raises SessionExpiredError until `new_session()` (listeners then hear CONNECTED with new_session True).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, SessionExpiredError
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent, ZnodeStat

from kafkad.zk.client import CheckOp, CreateOp, DeleteOp, Op, SetOp, ZkState

Watch = Callable[[WatchedEvent], None]


@dataclass
class _Node:
    data: bytes
    czxid: int
    version: int = 0
    owner: int = 0
    seq: int = 0
    ctime: int = 0  # ms, ZooKeeper's clock


@dataclass
class FakeZk:
    nodes: dict[str, _Node] = field(default_factory=lambda: {"/": _Node(b"", 0)})
    session: int = 1
    connected: bool = True
    zxid: int = 0
    data_watches: dict[str, list[Watch]] = field(default_factory=dict)
    child_watches: dict[str, list[Watch]] = field(default_factory=dict)
    listeners: list[Callable[[ZkState, bool], None]] = field(default_factory=list)
    calls: int = 0
    clock_ms: float = field(default_factory=lambda: time.time() * 1000)  # ctime of what is created now

    # --- session -----------------------------------------------------------------------------------
    @property
    def session_id(self) -> int | None:
        return self.session if self.connected else None

    async def close(self) -> None:
        self.connected = False

    def add_state_listener(self, listener: Callable[[ZkState, bool], None]) -> None:
        self.listeners.append(listener)

    def expire_session(self) -> None:
        self.connected = False
        for path in [p for p, n in self.nodes.items() if n.owner == self.session]:
            self._remove(path)
        pending = [w for ws in (*self.data_watches.values(), *self.child_watches.values()) for w in ws]
        self.data_watches.clear()
        self.child_watches.clear()
        loop = asyncio.get_running_loop()
        for w in pending:
            loop.call_soon(w, WatchedEvent(EventType.NONE, KeeperState.EXPIRED_SESSION, None))
        for listener in list(self.listeners):
            listener(ZkState.LOST, False)

    def new_session(self) -> None:
        self.session += 1
        self.connected = True
        for listener in list(self.listeners):
            listener(ZkState.CONNECTED, True)

    def _check(self) -> None:
        self.calls += 1
        if not self.connected:
            raise SessionExpiredError()

    # --- tree ----------------------------------------------------------------------------------------
    def _stat(self, path: str) -> ZnodeStat:
        n = self.nodes[path]
        kids = len(self._kids(path))
        return ZnodeStat(n.czxid, n.czxid, n.ctime, n.ctime, n.version, 0, 0, n.owner, len(n.data), kids, 0)

    def _kids(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(
            p[len(prefix) :] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix) :]
        )

    def _fire(self, table: dict[str, list[Watch]], path: str, kind: EventType) -> None:
        loop = asyncio.get_running_loop()
        for w in table.pop(path, []):
            loop.call_soon(w, WatchedEvent(kind, KeeperState.CONNECTED, path))

    def _parent(self, path: str) -> str:
        return path.rsplit("/", 1)[0] or "/"

    def _create(self, path: str, value: bytes, ephemeral: bool, sequence: bool, makepath: bool) -> str:
        parent = self._parent(path)
        if parent not in self.nodes:
            if not makepath:
                raise NoNodeError()
            self._create(parent, b"", False, False, True)
        if sequence:
            p = self.nodes[parent]
            path, p.seq = f"{path}{p.seq:010d}", p.seq + 1
        if path in self.nodes:
            raise NodeExistsError()
        self.zxid += 1
        self.nodes[path] = _Node(
            value, self.zxid, owner=self.session if ephemeral else 0, ctime=int(self.clock_ms)
        )
        self._fire(self.data_watches, path, EventType.CREATED)
        self._fire(self.child_watches, parent, EventType.CHILD)
        return path

    def _set(self, path: str, value: bytes, version: int) -> ZnodeStat:
        n = self.nodes.get(path)
        if n is None:
            raise NoNodeError()
        if version != -1 and version != n.version:
            raise BadVersionError()
        n.data, n.version = value, n.version + 1
        self._fire(self.data_watches, path, EventType.CHANGED)
        return self._stat(path)

    def _delete(self, path: str, version: int) -> None:
        n = self.nodes.get(path)
        if n is None:
            raise NoNodeError()
        if version != -1 and version != n.version:
            raise BadVersionError()
        if self._kids(path):
            raise NotEmptyError()
        self._remove(path)

    def _remove(self, path: str) -> None:
        del self.nodes[path]
        self._fire(self.data_watches, path, EventType.DELETED)
        self._fire(self.child_watches, path, EventType.DELETED)
        self._fire(self.child_watches, self._parent(path), EventType.CHILD)

    # --- the ZkClient interface --------------------------------------------------------------------------
    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat]:
        self._check()
        if path not in self.nodes:
            raise NoNodeError()
        if watch is not None:
            self.data_watches.setdefault(path, []).append(watch)
        return self.nodes[path].data, self._stat(path)

    async def get_or_none(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat] | None:
        try:
            return await self.get(path, watch)
        except NoNodeError:
            return None

    async def children(self, path: str, watch: Watch | None = None) -> list[str]:
        self._check()
        if path not in self.nodes:
            raise NoNodeError()
        if watch is not None:
            self.child_watches.setdefault(path, []).append(watch)
        return self._kids(path)

    async def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        self._check()
        if watch is not None:
            self.data_watches.setdefault(path, []).append(watch)
        return self._stat(path) if path in self.nodes else None

    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        self._check()
        return self._create(path, value, ephemeral, sequence, makepath)

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        self._check()
        return self._set(path, value, version)

    async def delete(self, path: str, version: int = -1) -> None:
        self._check()
        self._delete(path, version)

    async def delete_recursive(self, path: str) -> None:
        self._check()
        for p in sorted(
            (p for p in self.nodes if p == path or p.startswith(path + "/")), key=len, reverse=True
        ):
            self._remove(p)

    async def ensure_path(self, path: str) -> None:
        self._check()
        if path not in self.nodes:
            self._create(path, b"", False, False, True)

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        self._check()
        for op in ops:  # validate first: all or nothing
            if isinstance(op, CreateOp):
                if op.path in self.nodes and not op.sequence:
                    raise NodeExistsError()
                if self._parent(op.path) not in self.nodes:
                    raise NoNodeError()
            elif isinstance(op, (SetOp, DeleteOp, CheckOp)):
                n = self.nodes.get(op.path)
                if n is None and not any(isinstance(o, CreateOp) and o.path == op.path for o in ops):
                    raise NoNodeError()
                if n is not None and op.version != -1 and op.version != n.version:
                    raise BadVersionError()
        out: list[Any] = []
        for op in ops:
            if isinstance(op, CreateOp):
                out.append(self._create(op.path, op.value, op.ephemeral, op.sequence, False))
            elif isinstance(op, SetOp):
                out.append(self._set(op.path, op.value, op.version))
            elif isinstance(op, DeleteOp):
                self._delete(op.path, op.version)
                out.append(True)
            else:
                out.append(True)
        return out
