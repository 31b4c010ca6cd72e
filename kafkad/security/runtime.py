"""The broker's security services in one place (broker.services["security"]): TLS contexts and their
reload, per-connection sessions, the SCRAM credential store and the authorizer.

Standalone, credentials and ACLs are local files in the first log dir; in cluster mode a ZooKeeper store
(same interfaces, Kafka's /config/users and /kafka-acl layout) can be passed in instead.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from kafkad.daemon.dispatcher import Dispatcher
from kafkad.security.acl import AclBinding, Authorizer
from kafkad.security.acl_store import FILE_NAME as ACL_FILE
from kafkad.security.acl_store import AclStore, FileAclStore
from kafkad.security.credentials import FILE_NAME, CredentialStore, FileCredentialStore
from kafkad.security.session import Authenticators, Session
from kafkad.security.settings import METRICS_TLS, Protocol, SecurityConfig
from kafkad.security.tls import TlsReloader


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
        self._auth = {
            n: Authenticators(ls, self.credentials, config.reauth_ms)
            for n, ls in config.listeners.items()
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

    def save_acls(self, bindings: list[AclBinding]) -> None:
        """Store the whole ACL set (blocking: from an executor)."""
        self.acl_store.save(bindings)

    def reload_tls(self) -> None:
        if self.tls is not None:
            self.tls.reload()
