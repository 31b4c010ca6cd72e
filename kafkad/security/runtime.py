"""The broker's security services in one place (Broker.security): TLS contexts and their
reload, per-connection sessions, the SCRAM credential store and the authorizer.

Standalone, credentials and ACLs are local files in the first log dir; in cluster mode `use_zookeeper`
switches both to ZooKeeper (kafkad.security.zk_store: Kafka's /config/users and /kafka-acl layout, shared
by every broker, change notifications applied live).

What a configuration does not use is not imported: a PLAINTEXT-only broker loads no TLS, SASL or SCRAM
code, and its credential and ACL stores are made on first use (an AlterUserScramCredentials or
CreateAcls request) unless their file exists, which is then read at startup as before.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from kafkad.security.settings import METRICS_TLS, Protocol, SecurityConfig

if TYPE_CHECKING:
    from kafkad.network.dispatcher import Dispatcher
    from kafkad.security.acl import AclBinding, Authorizer
    from kafkad.security.acl_store import AclStore
    from kafkad.security.credentials import CredentialStore
    from kafkad.security.session import Authenticators, Session
    from kafkad.security.tls import TlsReloader
    from kafkad.security.zk_store import ZkSecurityStore
    from kafkad.zk.client import ZkClient

# credentials.FILE_NAME and acl_store.FILE_NAME, named here so that startup need not import them
CREDENTIALS_FILE = "kafkad-scram-credentials.json"
ACLS_FILE = "kafkad-acls.json"


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
        self._state_dir = state_dir
        self._credentials = credentials
        self._acl_store = acls
        if (state_dir / CREDENTIALS_FILE).exists():
            self._credentials = self.credentials  # read now, as at every startup
        self.zk_store: ZkSecurityStore | None = None
        # The authorizer exists only with authorizer.class.name (broker.authorizer: None = allow all).
        self.authorizer: Authorizer | None = None
        if config.authorizer:
            from kafkad.security.acl import Authorizer

            self.authorizer = Authorizer(
                self.acl_store.load(), super_users=config.super_users, allow_if_no_acl=config.allow_if_no_acl
            )
        tls = {n: ls.tls for n, ls in config.listeners.items() if ls.tls is not None}
        if config.metrics_tls is not None:
            tls[METRICS_TLS] = config.metrics_tls
        self.tls: TlsReloader | None = None
        if tls:
            from kafkad.security.tls import TlsReloader

            self.tls = TlsReloader(tls)
        self._auth = self._authenticators()

    @property
    def credentials(self) -> CredentialStore:
        """SCRAM credentials: the file in the first log dir, or ZooKeeper's (use_zookeeper)."""
        if self._credentials is None:
            from kafkad.security.credentials import FileCredentialStore

            self._credentials = FileCredentialStore(self._state_dir / CREDENTIALS_FILE)
        return self._credentials

    @property
    def acl_store(self) -> AclStore:
        if self._acl_store is None:
            from kafkad.security.acl_store import FileAclStore

            self._acl_store = FileAclStore(self._state_dir / ACLS_FILE)
        return self._acl_store

    def _authenticators(self) -> dict[str, Authenticators]:
        secured = {n: ls for n, ls in self.config.listeners.items() if ls.protocol is not Protocol.PLAINTEXT}
        if not secured:
            return {}
        from kafkad.security.session import Authenticators

        return {n: Authenticators(ls, self.credentials, self.config.reauth_ms) for n, ls in secured.items()}

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
        if auth is None:
            return None
        from kafkad.security.session import Session

        return Session(dispatcher, auth)

    async def use_zookeeper(self, zk: ZkClient) -> None:
        """Cluster mode: credentials and ACLs live in ZooKeeper (Kafka's layout), shared by the brokers."""
        from kafkad.security.zk_store import ZkSecurityStore

        def on_acls(bindings: list[AclBinding]) -> None:
            if self.authorizer is not None:
                self.authorizer.replace(bindings)

        store = ZkSecurityStore(zk, on_acls)
        await store.start()
        self._credentials = self._acl_store = self.zk_store = store
        self._auth = self._authenticators()  # before the listeners open: no session holds the old store

    def close(self) -> None:
        if self.zk_store is not None:
            self.zk_store.close()

    def reload_tls(self) -> None:
        if self.tls is not None:
            self.tls.reload()
