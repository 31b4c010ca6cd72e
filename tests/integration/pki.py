"""Certificates made by the tests (openssl CLI): a CA, a server certificate for 127.0.0.1/localhost, client
certificates, an expired one and one from an unknown CA. Everything PEM, keys unencrypted."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)} failed:\n{r.stderr}")


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path  # CA certificate
    server: Path  # key + chain in one PEM (ssl.keystore.location)
    server_cert: Path
    server_key: Path

    def client(self, name: str, *, days: int = 2, expired: bool = False, ca: str = "ca") -> tuple[Path, Path]:
        """(cert, key) of a client certificate CN=<name> signed by `ca` ("ca" or another made by `other_ca`)."""
        d = self.dir
        key, csr, cert = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt"
        _openssl("genrsa", "-out", key.name, "2048", cwd=d)
        _openssl(
            "req", "-new", "-key", key.name, "-out", csr.name, "-subj", f"/O=kafkad-tests/CN={name}", cwd=d
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            csr.name,
            "-CA",
            f"{ca}.crt",
            "-CAkey",
            f"{ca}.key",
            "-CAcreateserial",
            "-out",
            cert.name,
            "-days",
            "-1" if expired else str(days),
            cwd=d,
        )  # -days -1: expired a day ago (OpenSSL 3.0 has no -not_after)
        return cert, key

    def other_ca(self, name: str) -> Path:
        _make_ca(self.dir, name)
        return self.dir / f"{name}.crt"

    def server_cert_again(self, name: str) -> tuple[Path, Path]:
        """A fresh server certificate (rotation), signed by the same CA."""
        return _server(self.dir, name)


def _make_ca(d: Path, name: str) -> None:
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=d)
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        f"{name}.key",
        "-days",
        "3",
        "-subj",
        f"/CN=kafkad test {name}",
        "-out",
        f"{name}.crt",
        cwd=d,
    )


def _server(d: Path, name: str) -> tuple[Path, Path]:
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=d)
    _openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=localhost", cwd=d)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        cwd=d,
    )
    return d / f"{name}.crt", d / f"{name}.key"


def make_pki(d: Path) -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    _make_ca(d, "ca")
    cert, key = _server(d, "server")
    (d / "server.pem").write_text(key.read_text() + cert.read_text())
    return Pki(d, d / "ca.crt", d / "server.pem", cert, key)
