"""The broker's security services in one place (broker.services["security"]): TLS contexts and their
reload, per-connection sessions, the SCRAM credential store and the authorizer.

Standalone, credentials and ACLs are local files in the first log dir; in cluster mode `use_zookeeper`
switches both to ZooKeeper (kafkad.security.zk_store: Kafka's /config/users and /kafka-acl layout, shared
by every broker, change notifications applied live).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from kafkad.daemon.dispatcher import Dispatcher
from kafkad.security.acl import AclBinding, Authorizer
from kafkad.security.acl_store import FILE_NAME as ACL_FILE
from kafkad.security.acl_store import AclStore, FileAclStore
from kafkad.security.credentials import FILE_NAME, CredentialStore, FileCredentialStore
from kafkad.security.session import Authenticators, Session
from kafkad.security.settings import METRICS_TLS, Protocol, SecurityConfig
from kafkad.security.tls import TlsReloader

if TYPE_CHECKING:
    from kafkad.election.zk_client import ZkClient
    from kafkad.security.zk_store import ZkSecurityStore


class SecurityRuntime:
    def __init__(
        self,
        config: SecurityConfig,
        state_dir: Path,
        *,
        credentials: CredentialStore | None = None,
        acls: AclStore | None = None,
    ) -> None:
        self.config = config
        self.credentials: CredentialStore = credentials or FileCredentialStore(state_dir / FILE_NAME)
        self.acl_store: AclStore = acls or FileAclStore(state_dir / ACL_FILE)
        self.zk_store: ZkSecurityStore | None = None
        # The authorizer exists only with authorizer.class.name (broker.authorizer: None = allow all).
        self.authorizer: Authorizer | None = (
            Authorizer(
                self.acl_store.load(), super_users=config.super_users, allow_if_no_acl=config.allow_if_no_acl
            )
            if config.authorizer
            else None
        )
        tls = {n: ls.tls for n, ls in config.listeners.items() if ls.tls is not None}
        if config.metrics_tls is not None:
            tls[METRICS_TLS] = config.metrics_tls
        self.tls: TlsReloader | None = TlsReloader(tls) if tls else None
        self._auth = self._authenticators()

    def _authenticators(self) -> dict[str, Authenticators]:
        return {
            n: Authenticators(ls, self.credentials, self.config.reauth_ms)
            for n, ls in self.config.listeners.items()
            if ls.protocol is not Protocol.PLAINTEXT
        }

    def secured(self, listener: str) -> bool:
        """A TLS or SASL listener: its connections get a Session."""
        return listener in self._auth

    def tls_context(self, listener: str) -> ssl.SSLContext | None:
        """A TLS listener's context (or, for METRICS_TLS, the https metrics endpoints'); else None."""
        if listener == METRICS_TLS:
            return self.tls.context(listener) if self.tls is not None and self.config.metrics_tls else None
        ls = self.config.listeners.get(listener)
        if self.tls is None or ls is None or ls.tls is None:
            return None
        return self.tls.context(listener)

    def session(self, listener: str, dispatcher: Dispatcher) -> Session | None:
        auth = self._auth.get(listener)
        return Session(dispatcher, auth) if auth is not None else None

    async def use_zookeeper(self, zk: ZkClient) -> None:
        """Cluster mode: credentials and ACLs live in ZooKeeper (Kafka's layout), shared by the brokers."""
        from kafkad.security.zk_store import ZkSecurityStore

        def on_acls(bindings: list[AclBinding]) -> None:
            if self.authorizer is not None:
                self.authorizer.replace(bindings)

        store = ZkSecurityStore(zk, on_acls)
        await store.start()
        self.credentials = self.acl_store = self.zk_store = store
        self._auth = self._authenticators()  # before the listeners open: no session holds the old store

    def close(self) -> None:
        if self.zk_store is not None:
            self.zk_store.close()

    def reload_tls(self) -> None:
        if self.tls is not None:
            self.tls.reload()
