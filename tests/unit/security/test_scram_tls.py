"""SCRAM-SHA-256 against RFC 7677's worked example, PLAIN, and the TLS reloader's change detection."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from kafkad.security.scram import ScramClient, ScramError, ScramServer, make_credential
from kafkad.security.session import AuthFailed, PlainServer


def test_rfc7677_example(monkeypatch: pytest.MonkeyPatch) -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = make_credential("SCRAM-SHA-256", "pencil", 4096, salt)
    # the nonce scram.py draws from the secrets module
    monkeypatch.setattr(secrets, "token_urlsafe", lambda _n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server = ScramServer("SCRAM-SHA-256", lambda u: cred if u == "user" else None)
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_server_and_failures(mech: str) -> None:
    cred = make_credential(mech, "s3cret", 4096)
    lookup = {"alice": cred}.get
    client, server = ScramClient(mech, "alice", "s3cret"), ScramServer(mech, lookup)
    client.verify(server.step(client.final(server.step(client.first()))))
    for user, pw in (("alice", "wrong"), ("nobody", "s3cret")):
        client, server = ScramClient(mech, user, pw), ScramServer(mech, lookup)
        first = server.step(client.first())  # an unknown user gets a plausible challenge too
        with pytest.raises(ScramError, match="Invalid user credentials"):
            server.step(client.final(first))
    with pytest.raises(ScramError):
        ScramServer(mech, lookup).step(b"y,,n=alice,r=abc")  # channel binding is refused


def test_plain() -> None:
    s = PlainServer({"alice": "pw"})
    assert s.step(b"\0alice\0pw") == b"" and s.complete and s.username == "alice"
    for token in (b"\0alice\0nope", b"bob\0alice\0pw", b"alice\0pw", b"\0\0pw"):
        with pytest.raises(AuthFailed):
            PlainServer({"alice": "pw"}).step(token)


def test_tls_reloader_notices_changed_files(tmp_path: Path) -> None:
    from kafkad.security.settings import TlsSettings
    from kafkad.security.tls import TlsReloader

    def make(name: str) -> Path:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", str(tmp_path / "k.pem"), "-out", str(tmp_path / "c.pem")],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        out = tmp_path / f"{name}.pem"
        out.write_text((tmp_path / "k.pem").read_text() + (tmp_path / "c.pem").read_text())
        return out

    ks = tmp_path / "ks.pem"
    make("one").replace(ks)
    keys = {"keystore_location": "ssl.keystore.location"}
    t = TlsSettings(str(ks), None, None, None, None, None, "none", ("TLSv1.2", "TLSv1.3"), (), keys)
    r = TlsReloader({"SSL": t})
    assert r.reload(only_changed=True) == 0
    make("two").replace(ks)
    st = ks.stat()
    os.utime(ks, (st.st_atime, st.st_mtime + 5))
    assert r.reload(only_changed=True) == 1 and r.reload(only_changed=True) == 0
    ks.write_text("garbage")  # a half-written file: logged, old certificate kept, retried on the next change
    os.utime(ks, (st.st_atime, st.st_mtime + 10))
    assert r.reload(only_changed=True) == 0
