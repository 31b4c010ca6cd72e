"""kazoo bridged into the asyncio event loop.

Every ZooKeeper call uses kazoo's *_async API: the request is queued to kazoo's own connection thread and
its completion is handed back to the loop with `loop.call_soon_threadsafe`, so nothing here ever blocks the
loop (only `start` waits for the first connection, in an executor). Watches are one-shot as in ZooKeeper;
their callbacks and the connection-state listener also hop to the loop before running.

Connection states reach listeners as `ZkState`: SUSPENDED (connection lost, session maybe alive: stop
acting on ZooKeeper-derived authority), LOST (session expired: ephemerals are gone) and CONNECTED
(`new_session` True when the session differs from the one before: re-register, re-elect).

Security (zk_security.py): SASL DIGEST-MD5 and/or mutual TLS per ZkSecurity, and every znode created
here (create, ensure_path, multi) gets the ACL zk_acls.default_acls gives its path. `start` fails with
ZkConnectError naming the setting when ZooKeeper refuses the login or the TLS handshake: the broker exits
rather than running with less security than configured.

Runs on the event loop; kazoo's threads only ever touch the loop through call_soon_threadsafe.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SASLException,
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat
from kazoo.security import ACL

from kafkad.zk.acls import default_acls
from kafkad.zk.security import NO_SECURITY, ZkSecurity, kazoo_options

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
    "ZkConnectError",
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


# after kazoo gave up connecting (a refused login on a reconnect): the pause before starting it again
GAVE_UP_RETRY_S = 5.0


class ZkConnectError(ConnectionError):
    """No usable ZooKeeper session at start: none answered, the SASL login or the TLS handshake was refused.
    The message names the setting to check (an OSError: the daemon logs it as one line and exits 1)."""


class _KazooLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """kazoo's logger: remembers the last connection problem, which `start` turns into its error. While
    starting, kazoo's tracebacks (a refused SASL login kills its connection thread) become one line."""

    def __init__(self) -> None:
        super().__init__(logging.getLogger("kazoo.client"), {})
        self.starting = False
        self.problems: collections.deque[tuple[str, BaseException | None]] = collections.deque(maxlen=8)

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if level >= logging.WARNING:
            exc = sys.exc_info()[1] if kwargs.get("exc_info") else None
            exc = exc or next((a for a in args if isinstance(a, BaseException)), None)
            try:
                text = str(msg) % args if args else str(msg)
            except (TypeError, ValueError):
                text = f"{msg} {args}"
            problem = f"{text}: {exc!r}" if kwargs.get("exc_info") and exc is not None else text
            self.problems.append((problem, exc))
            if self.starting or isinstance(exc, KazooException):  # kazoo's own errors say it all
                kwargs.pop("exc_info", None)
                level = logging.WARNING if self.starting else level
                args, msg = (), problem
        super().log(level, msg, *args, **kwargs)


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
        security: ZkSecurity = NO_SECURITY,
    ) -> None:
        self._hosts, self._chroot = split_connect(connect)
        self._loop = loop or asyncio.get_running_loop()
        self._connection_timeout_s = connection_timeout_ms / 1000
        self._security = security
        self._kz_log = _KazooLog()
        self._kz = KazooClient(
            hosts=self._hosts,
            timeout=session_timeout_ms / 1000,
            logger=self._kz_log,
            **kazoo_options(security, self._on_kazoo_gave_up),
        )
        self._listeners: list[StateListener] = []
        self._session_id: int | None = None
        self._closed = False
        self._kz.add_listener(self._on_kazoo_state)

    # --- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect (waits in an executor), create the chroot if missing, then use it. ZkConnectError when
        no session could be had or ZooKeeper refused our credentials."""
        self._kz_log.starting = True
        try:
            try:
                await self._loop.run_in_executor(None, self._kz.start, self._connection_timeout_s)
                # kazoo reports CONNECTED before its SASL exchange: the first request waits for that
                # exchange and fails when ZooKeeper refused the login
                await asyncio.wait_for(self._wrap(self._kz.exists_async("/")), self._connection_timeout_s)
            except Exception as e:
                self._closed = True
                await self._loop.run_in_executor(None, self._stop_and_close)
                raise ZkConnectError(self._start_failure(e)) from None
        finally:
            self._kz_log.starting = False
        if self._chroot:
            await self.ensure_path(self._chroot)
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
        with contextlib.suppress(Exception):  # kazoo's start already stopped it after a time-out
            self._kz.stop()
            self._kz.close()

    def _on_kazoo_gave_up(self) -> None:  # kazoo's connection thread, ending
        if self._closed or self._kz_log.starting:
            return  # we stopped it, or start() reports why
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._schedule_reconnect)

    def _schedule_reconnect(self) -> None:
        """kazoo stopped connecting for good (ZooKeeper refused our SASL login on a reconnect): try again
        later, as Kafka's ZooKeeperClient reinitializes after an auth failure, instead of staying detached."""
        if self._closed:
            return
        problem = next((t for t, _ in reversed(self._kz_log.problems) if "Failed connecting" not in t), "")
        log.error("ZooKeeper connection given up (%s); connecting again in %g s", problem, GAVE_UP_RETRY_S)
        self._loop.call_later(GAVE_UP_RETRY_S, self._reconnect)

    def _reconnect(self) -> None:
        if not self._closed:
            self._loop.run_in_executor(None, self._restart_kazoo)

    def _restart_kazoo(self) -> None:  # executor: joins kazoo's ended thread, starts a new one
        try:
            self._kz.start_async()
        except Exception:
            log.exception("cannot restart the ZooKeeper connection")

    def _start_failure(self, e: Exception) -> str:
        sec, where = self._security, f"ZooKeeper at {self._hosts}"
        problems = list(self._kz_log.problems)
        excs = [e, *(x for _, x in problems if x is not None)]
        # the cause, not kazoo's closing words ("Failed connecting to Zookeeper within the retry policy")
        causes = [t for t, _ in problems if "SSL" in t] or [
            t for t, _ in problems if "Failed connecting" not in t
        ]
        problem = causes[-1] if causes else None
        refused = (AuthFailedError, SessionClosedRequireSaslError, SASLException)
        if sec.sasl is not None and any(isinstance(x, refused) for x in excs):
            return (
                f"{where} refused the SASL (DIGEST-MD5) login of user {sec.sasl.username!r} from "
                f"{sec.sasl.where}: check that user's password there"
            )
        if any(isinstance(x, SessionClosedRequireSaslError) for x in excs):
            return (
                f"{where} requires SASL authentication: set java.security.auth.login.config (or "
                "-Djava.security.auth.login.config=FILE in KAFKA_OPTS) to a JAAS file with a Client section"
            )
        if sec.tls is not None and problem is not None and "SSL" in problem:
            if "CERTIFICATE_VERIFY_FAILED" in problem:
                hint = (
                    "ZooKeeper's certificate is not trusted: check zookeeper.ssl.truststore.location (and "
                    "zookeeper.ssl.endpoint.identification.algorithm for the host name it must carry)"
                )
            elif "ALERT" in problem:  # ZooKeeper ended the handshake: our certificate
                hint = "ZooKeeper refused this broker's certificate: check zookeeper.ssl.keystore.location"
            else:
                hint = f"check {sec.tls.where}"
            return f"TLS to {where} failed ({problem}): {hint}"
        detail = f" (last problem: {problem})" if problem else ""
        return f"no session with {where} within {self._connection_timeout_s:g} s: {e!r}{detail}"

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
        try:
            return await self._create(path, value, ephemeral, sequence)
        except NoNodeError:
            parent = path.rsplit("/", 1)[0]
            if not makepath or not parent:
                raise
        await self.ensure_path(parent)  # each missing ancestor with its own ACL
        return await self._create(path, value, ephemeral, sequence)

    async def _create(self, path: str, value: bytes, ephemeral: bool, sequence: bool) -> str:
        created: str = await self._wrap(
            self._kz.create_async(path, value, self._acl(path), ephemeral=ephemeral, sequence=sequence)
        )
        return created

    def _acl(self, path: str) -> list[ACL]:
        """The ACL of a new znode at `path` (relative to the chroot once it is in use)."""
        return default_acls(self._security.set_acl, path)

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

    async def get_acls(self, path: str) -> list[ACL]:
        """Raises NoNodeError."""
        acls, _stat = await self._wrap(self._kz.get_acls_async(path))
        return list(acls)

    async def set_acls(self, path: str, acls: Sequence[ACL], version: int = -1) -> ZnodeStat:
        """Raises NoNodeError, NoAuthError (no ADMIN right on the znode)."""
        stat: ZnodeStat = await self._wrap(self._kz.set_acls_async(path, list(acls), version))
        return stat

    async def ensure_path(self, path: str) -> None:
        """Create `path` and its missing ancestors (persistent, empty), each with its own ACL."""
        if await self.exists(path) is not None:
            return
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            with contextlib.suppress(NodeExistsError):
                await self._create("/" + "/".join(parts[:i]), b"", False, False)

    async def multi(self, ops: Sequence[Op]) -> list[Any]:
        """All-or-nothing. Raises the first failing op's exception (BadVersionError, NodeExistsError...)."""
        tx = self._kz.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                tx.create(op.path, op.value, self._acl(op.path), ephemeral=op.ephemeral, sequence=op.sequence)
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
