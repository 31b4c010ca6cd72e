"""kazoo bridged into the asyncio event loop.

Every ZooKeeper call uses kazoo's *_async API: the request is queued to kazoo's own connection thread and
its completion is handed back to the loop with `loop.call_soon_threadsafe`, so nothing here ever blocks the
loop (only `start` waits for the first connection, in an executor). Watches are one-shot as in ZooKeeper;
their callbacks and the connection-state listener also hop to the loop before running.

Connection states reach listeners as `ZkState`: SUSPENDED (connection lost, session maybe alive: stop
acting on ZooKeeper-derived authority), LOST (session expired: ephemerals are gone) and CONNECTED
(`new_session` True when the session differs from the one before: re-register, re-elect).

Runs on the event loop; kazoo's threads only ever touch the loop through call_soon_threadsafe.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat

__all__ = [
    "ZK_CONNECTION_ERRORS",
    "BadVersionError",
    "CheckOp",
    "ConnectionLoss",
    "CreateOp",
    "DeleteOp",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionExpiredError",
    "SetOp",
    "WatchedEvent",
    "ZkClient",
    "ZkState",
    "ZnodeStat",
    "session_event",
    "split_connect",
]

log = logging.getLogger(__name__)


class ZkState(enum.Enum):
    SUSPENDED = "suspended"
    LOST = "lost"
    CONNECTED = "connected"


class CreateOp(NamedTuple):
    path: str
    value: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


class SetOp(NamedTuple):
    path: str
    value: bytes
    version: int = -1


class DeleteOp(NamedTuple):
    path: str
    version: int = -1


class CheckOp(NamedTuple):
    path: str
    version: int


Op = CreateOp | SetOp | DeleteOp | CheckOp

# What a call raises when the session is gone or the connection dropped under it: not a bug of the caller;
# the work is redone once a (new) session is up (ZkState.CONNECTED).
ZK_CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    ConnectionLoss,
    SessionExpiredError,
    ConnectionClosedError,
    OperationTimeoutError,
)


def session_event(event: WatchedEvent) -> bool:
    """True for the path-less event kazoo hands every pending watch when the connection drops or the
    session expires (type NONE, path None). It names no znode: kazoo has dropped the watch, so its owner
    must set it again once connected (ZkState.CONNECTED), not act on this event."""
    return event.type == EventType.NONE or event.path is None


Watch = Callable[[WatchedEvent], None]
StateListener = Callable[[ZkState, bool], None]


def split_connect(connect: str) -> tuple[str, str]:
    """`h1:p1,h2:p2/chroot` -> ("h1:p1,h2:p2", "/chroot" or "")."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""


class ZkClient:
    """One ZooKeeper session for the whole broker (registration, controller, ISR writes)."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int,
        connection_timeout_ms: int,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._hosts, self._chroot = split_connect(connect)
        self._loop = loop or asyncio.get_running_loop()
        self._connection_timeout_s = connection_timeout_ms / 1000
        self._kz = KazooClient(hosts=self._hosts, timeout=session_timeout_ms / 1000)
        self._listeners: list[StateListener] = []
        self._session_id: int | None = None
        self._closed = False
        self._kz.add_listener(self._on_kazoo_state)

    # --- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect (waits in an executor), create the chroot if missing, then use it."""
        await self._loop.run_in_executor(None, self._kz.start, self._connection_timeout_s)
        if self._chroot:
            await self._wrap(self._kz.ensure_path_async(self._chroot))
            self._kz.chroot = self._chroot
        cid = self._kz.client_id
        self._session_id = cid[0] if cid else None
        log.info(
            "connected to ZooKeeper %s%s (session 0x%x)", self._hosts, self._chroot, self._session_id or 0
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._loop.run_in_executor(None, self._stop_and_close)

    def _stop_and_close(self) -> None:
        self._kz.stop()
        self._kz.close()

    @property
    def connected(self) -> bool:
        return bool(self._kz.connected)

    @property
    def session_id(self) -> int | None:
        return self._session_id

    def add_state_listener(self, listener: StateListener) -> None:
        """`listener(state, new_session)` runs on the loop."""
        self._listeners.append(listener)

    def _on_kazoo_state(self, state: str) -> None:  # kazoo's thread: never block, hop to the loop
        if self._closed:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed (shutdown)
            self._loop.call_soon_threadsafe(self._deliver_state, state)

    def _deliver_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            cid = self._kz.client_id
            sid = cid[0] if cid else None
            new_session = sid is not None and sid != self._session_id
            self._session_id = sid
            zs, fresh = ZkState.CONNECTED, new_session
        elif state == KazooState.SUSPENDED:
            zs, fresh = ZkState.SUSPENDED, False
        else:
            zs, fresh = ZkState.LOST, False
        log.info("ZooKeeper connection %s%s", zs.value, " (new session)" if fresh else "")
        for listener in list(self._listeners):
            try:
                listener(zs, fresh)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    # --- bridging ----------------------------------------------------------------------------------
    def _wrap(self, async_result: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self._loop.create_future()

        def done(ar: Any) -> None:  # kazoo's thread
            if ar.successful():
                value, exc = ar.value, None
            else:
                value, exc = None, ar.exception
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(_settle, fut, value, exc)

        async_result.rawlink(done)
        return fut

    def _watch(self, cb: Watch | None) -> Callable[[WatchedEvent], None] | None:
        if cb is None:
            return None

        def fire(event: WatchedEvent) -> None:  # kazoo's thread
            if self._closed:
                return
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(cb, event)

        return fire

    # --- operations ----------------------------------------------------------------------------------
    async def get(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat]:
        """Raises NoNodeError."""
        data, stat = await self._wrap(self._kz.get_async(path, self._watch(watch)))
        return (data or b""), stat

    async def get_or_none(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat] | None:
        try:
            return await self.get(path, watch)
        except NoNodeError:
            return None

    async def children(self, path: str, watch: Watch | None = None) -> list[str]:
        """Raises NoNodeError."""
        out = await self._wrap(self._kz.get_children_async(path, self._watch(watch)))
        return list(out)

    async def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        stat: ZnodeStat | None = await self._wrap(self._kz.exists_async(path, self._watch(watch)))
        return stat

    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """The created path (with its sequence suffix). Raises NodeExistsError, NoNodeError."""
        created: str = await self._wrap(
            self._kz.create_async(path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath)
        )
        return created

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        """Raises BadVersionError, NoNodeError."""
        stat: ZnodeStat = await self._wrap(self._kz.set_async(path, value, version))
        return stat

    async def delete(self, path: str, version: int = -1) -> None:
        await self._wrap(self._kz.delete_async(path, version))

    async def delete_recursive(self, path: str) -> None:
        """Delete `path` and everything below it (children first); a missing node is fine."""
        try:
            kids = await self.children(path)
        except NoNodeError:
            return
        for k in kids:
            await self.delete_recursive(f"{path}/{k}")
        with contextlib.suppress(NoNodeError):
            await self.delete(path)

    async def ensure_path(self, path: str) -> None:
        await self._wrap(self._kz.ensure_path_async(path))

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        """All-or-nothing. Raises the first failing op's exception (BadVersionError, NodeExistsError...)."""
        tx = self._kz.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                tx.create(op.path, op.value, ephemeral=op.ephemeral, sequence=op.sequence)
            elif isinstance(op, SetOp):
                tx.set_data(op.path, op.value, op.version)
            elif isinstance(op, DeleteOp):
                tx.delete(op.path, op.version)
            else:
                tx.check(op.path, op.version)
        results: list[Any] = await self._wrap(tx.commit_async())
        for r in results:
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                raise r
        return results


def _settle(fut: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)
