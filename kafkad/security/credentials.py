"""Where SCRAM credentials live: a small interface, and the standalone implementation (a local file).

The file has the shape of Kafka's ZooKeeper entries (/config/users/<user> holds
`{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=..."}}`): one
JSON object `{"version": 1, "users": {<user>: <that config map>}}`, written atomically (temp file, fsync,
rename) with mode 0600. Lookups are served from memory; writes go to disk first, then to memory.
A ZooKeeper-backed store (cluster mode) implements the same four methods.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Protocol

from kafkad.security.scram import ScramCredential
from kafkad.storage.checkpoints import write_atomic

FILE_NAME = "kafkad-scram-credentials.json"


class CredentialStore(Protocol):
    def get(self, user: str, mechanism: str) -> ScramCredential | None: ...
    def describe(self) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations."""
        ...

    async def alter(
        self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]
    ) -> None:
        """Apply all; raises OSError (file) or a ZooKeeper error when it cannot be stored."""
        ...


class MemoryCredentialStore:
    """In-memory credentials (tests; the file store's cache)."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def describe(self) -> dict[str, dict[str, int]]:
        return {u: {m: c.iterations for m, c in ms.items()} for u, ms in self._users.items() if ms}

    def _apply(
        self,
        users: dict[str, dict[str, ScramCredential]],
        upserts: list[tuple[str, str, ScramCredential]],
        deletions: list[tuple[str, str]],
    ) -> dict[str, dict[str, ScramCredential]]:
        out = {u: dict(ms) for u, ms in users.items()}
        for user, mech in deletions:
            out.get(user, {}).pop(mech, None)
        for user, mech, cred in upserts:
            out.setdefault(user, {})[mech] = cred
        return {u: ms for u, ms in out.items() if ms}

    async def alter(
        self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]
    ) -> None:
        self._users = self._apply(self._users, upserts, deletions)


class FileCredentialStore(MemoryCredentialStore):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._lock = threading.Lock()
        if path.exists():
            data = json.loads(path.read_text())
            self._users = {
                u: {m: ScramCredential.from_text(t) for m, t in ms.items()}
                for u, ms in data.get("users", {}).items()
            }

    async def alter(
        self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]
    ) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._write, upserts, deletions)

    def _write(
        self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]
    ) -> None:
        with self._lock:
            users = self._apply(self._users, upserts, deletions)
            body = {
                "version": 1,
                "users": {
                    u: {m: c.to_text() for m, c in sorted(ms.items())} for u, ms in sorted(users.items())
                },
            }
            write_atomic(self.path, (json.dumps(body, indent=1) + "\n").encode(), mode=0o600)
            self._users = users
