"""SCRAM credentials and ACLs in ZooKeeper, in Kafka's layout (cluster mode), shared by every broker.

Credentials: /config/users/<user> = {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
server_key=...,iterations=..."}}, each change announced by a /config/changes/config_change_<seq> node
{"version":2,"entity_path":"users/<user>"} (Kafka's ConfigChangeNotification).
ACLs: /kafka-acl/<Type>/<name> (LITERAL) and /kafka-acl-extended/prefixed/<Type>/<name> (PREFIXED), each
{"version":1,"acls":[{"principal":..,"permissionType":"Allow","operation":"Read","host":"*"}]}; changes
announced under /kafka-acl-changes/acl_changes_<seq> ("Topic:orders") and /kafka-acl-extended-changes/
acl_changes_<seq> ({"version":1,"resourceType":"Topic","name":"logs-","patternType":"Prefixed"}), as
Kafka's ZkAclStore writes them.

Every broker keeps the whole set in memory (lookups never touch ZooKeeper), loads it at start, and on a
change notification re-reads the named entity and hands the new ACL set to the authorizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from kafkad.security.acl import AclBinding, PatternType, ResourceType
from kafkad.security.acl_store import TYPE_NAMES, TYPES, binding_from_json, entry_json
from kafkad.security.scram import ScramCredential
from kafkad.zk.client import (
    ZK_CONNECTION_ERRORS,
    NodeExistsError,
    NoNodeError,
    WatchedEvent,
    ZkClient,
    ZkState,
    session_event,
)
from kafkad.zk.notifications import purge_obsolete

log = logging.getLogger(__name__)

USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
ACL_ROOTS = {PatternType.LITERAL: "/kafka-acl", PatternType.PREFIXED: "/kafka-acl-extended/prefixed"}
ACL_CHANGES = {PatternType.LITERAL: "/kafka-acl-changes", PatternType.PREFIXED: "/kafka-acl-extended-changes"}


def _seq(name: str) -> int:
    try:
        return int(name.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return -1


class ZkSecurityStore:
    """CredentialStore and AclStore over ZooKeeper; `start()` loads and watches."""

    def __init__(self, zk: ZkClient, on_acls: Callable[[list[AclBinding]], None]) -> None:
        self._zk = zk
        self._on_acls = on_acls
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._acls: dict[tuple[PatternType, ResourceType, str], list[AclBinding]] = {}
        self._last: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    async def start(self) -> None:
        zk = self._zk
        for p in (USERS, CONFIG_CHANGES, *ACL_ROOTS.values(), *ACL_CHANGES.values()):
            await zk.ensure_path(p)
        for user in await zk.children(USERS):
            await self._load_user(user)
        for ptype, root in ACL_ROOTS.items():
            for tname in await zk.children(root):
                if tname not in TYPES:
                    continue
                for name in await zk.children(f"{root}/{tname}"):
                    await self._load_resource(ptype, TYPES[tname], name)
        for path in (CONFIG_CHANGES, *ACL_CHANGES.values()):
            kids = await zk.children(path, watch=self._watcher(path))
            self._last[path] = max((_seq(c) for c in kids), default=-1)
            if path != CONFIG_CHANGES:  # /config/changes: cluster_mode purges it
                await purge_obsolete(zk, path, kids)
        self._on_acls(self.load())
        zk.add_state_listener(self._on_zk_state)
        log.info("security store: %d SCRAM users, %d ACLs from ZooKeeper", len(self._users), len(self.load()))

    def close(self) -> None:
        self._closing = True
        for t in self._tasks:
            t.cancel()

    # --- CredentialStore -----------------------------------------------------------------------------
    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def describe(self) -> dict[str, dict[str, int]]:
        return {u: {m: c.iterations for m, c in ms.items()} for u, ms in self._users.items() if ms}

    async def alter(
        self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]
    ) -> None:
        users = {u for u, _ in deletions} | {u for u, _, _ in upserts}
        for user in sorted(users):
            config = {m: c.to_text() for m, c in self._users.get(user, {}).items()}
            for u, m in deletions:
                if u == user:
                    config.pop(m, None)
            for u, m, c in upserts:
                if u == user:
                    config[m] = c.to_text()
            await self._put(f"{USERS}/{user}", {"version": 1, "config": config})
            await self._zk.create(
                f"{CONFIG_CHANGES}/config_change_",
                json.dumps({"version": 2, "entity_path": f"users/{user}"}).encode(),
                sequence=True,
            )
            await self._load_user(user)

    # --- AclStore --------------------------------------------------------------------------------------
    def load(self) -> list[AclBinding]:
        return [b for bs in self._acls.values() for b in bs]

    async def save(self, bindings: list[AclBinding]) -> None:
        wanted: dict[tuple[PatternType, ResourceType, str], list[AclBinding]] = {}
        for b in bindings:
            wanted.setdefault((b.pattern_type, b.resource_type, b.name), []).append(b)
        for key in sorted(set(wanted) | set(self._acls), key=str):
            if set(wanted.get(key, ())) == set(self._acls.get(key, ())):
                continue
            ptype, rtype, name = key
            path = f"{ACL_ROOTS[ptype]}/{TYPE_NAMES[rtype]}/{name}"
            acls = wanted.get(key, [])
            if acls:
                await self._put(path, {"version": 1, "acls": [entry_json(b) for b in acls]})
            else:
                with contextlib.suppress(NoNodeError):
                    await self._zk.delete(path)
            if ptype is PatternType.LITERAL:
                note = f"{TYPE_NAMES[rtype]}:{name}".encode()
            else:
                note = json.dumps(
                    {"version": 1, "resourceType": TYPE_NAMES[rtype], "name": name, "patternType": "Prefixed"}
                ).encode()
            await self._zk.create(f"{ACL_CHANGES[ptype]}/acl_changes_", note, sequence=True)
            self._acls[key] = acls
            if not acls:
                del self._acls[key]

    # --- ZooKeeper ---------------------------------------------------------------------------------------
    async def _put(self, path: str, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            await self._zk.set(path, data)
        except NoNodeError:
            try:
                await self._zk.create(path, data, makepath=True)
            except NodeExistsError:
                await self._zk.set(path, data)

    async def _load_user(self, user: str) -> None:
        got = await self._zk.get_or_none(f"{USERS}/{user}")
        config = json.loads(got[0] or b"{}").get("config", {}) if got else {}
        creds = {}
        for mech, text in config.items():
            with contextlib.suppress(KeyError, ValueError):
                creds[mech] = ScramCredential.from_text(text)
        if creds:
            self._users[user] = creds
        else:
            self._users.pop(user, None)

    async def _load_resource(self, ptype: PatternType, rtype: ResourceType, name: str) -> None:
        got = await self._zk.get_or_none(f"{ACL_ROOTS[ptype]}/{TYPE_NAMES[rtype]}/{name}")
        acls = [
            binding_from_json(rtype, name, ptype, a)
            for a in (json.loads(got[0] or b"{}").get("acls", []) if got else [])
        ]
        key = (ptype, rtype, name)
        if acls:
            self._acls[key] = acls
        else:
            self._acls.pop(key, None)

    def _watcher(self, path: str) -> Callable[[WatchedEvent], None]:
        def fire(e: WatchedEvent) -> None:
            if not session_event(e):  # a dropped watch is set again by _on_zk_state(CONNECTED)
                self._spawn_changes(path)

        return fire

    def _spawn_changes(self, path: str) -> None:
        if self._closing:
            return
        task = asyncio.get_running_loop().create_task(self._changes(path))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_zk_state(self, state: ZkState, _new_session: bool) -> None:
        """kazoo drops every watch on a connection loss: once connected again, watch and catch up."""
        if state is ZkState.CONNECTED:
            for path in (CONFIG_CHANGES, *ACL_CHANGES.values()):
                self._spawn_changes(path)

    async def _changes(self, path: str) -> None:
        """Apply the notifications under `path` newer than the last one seen (and watch again)."""
        try:
            kids = await self._zk.children(path, watch=self._watcher(path))
            acls_changed = False
            for c in sorted(kids, key=_seq):
                if _seq(c) <= self._last.get(path, -1):
                    continue
                self._last[path] = _seq(c)
                got = await self._zk.get_or_none(f"{path}/{c}")
                data = got[0] if got else b""
                if path == CONFIG_CHANGES:
                    entity = str(json.loads(data or b"{}").get("entity_path", ""))
                    if entity.startswith("users/"):
                        await self._load_user(entity.split("/", 1)[1])
                elif path == ACL_CHANGES[PatternType.LITERAL]:
                    tname, _, name = data.decode().partition(":")
                    if tname in TYPES:
                        await self._load_resource(PatternType.LITERAL, TYPES[tname], name)
                        acls_changed = True
                else:
                    ev = json.loads(data or b"{}")
                    if ev.get("resourceType") in TYPES:
                        await self._load_resource(PatternType.PREFIXED, TYPES[ev["resourceType"]], ev["name"])
                        acls_changed = True
            if acls_changed:
                self._on_acls(self.load())
            if path != CONFIG_CHANGES:  # /config/changes: cluster_mode purges it
                await purge_obsolete(self._zk, path, kids)
        except ZK_CONNECTION_ERRORS as e:  # redone (and watched again) on reconnect
            log.warning("security store: ZooKeeper connection lost reading %s: %r", path, e)
        except Exception:
            log.exception("security store: applying the changes under %s failed", path)
