"""An mTLS client's principal is its subject DN as Kafka writes it (RFC 2253: User:CN=alice,OU=Eng,O=Org),
so ACLs and super.users written for Kafka match; read from a real certificate decoded by Python's ssl."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

from kafkad.security.session import ANONYMOUS, principal_from_cert


def _subject_of(tmp_path: Path, subj: str) -> dict[str, object]:
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed to make the test certificate"
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
         "-subj", subj, "-days", "1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    decoded: dict[str, object] = ssl._ssl._test_decode_cert(str(crt))  # type: ignore[attr-defined]
    return decoded  # the dict getpeercert() returns


def test_principal_is_the_rfc2253_dn(tmp_path: Path) -> None:
    cert = _subject_of(tmp_path, "/C=US/ST=CA/L=SF/O=Org/OU=Eng/CN=alice")
    assert principal_from_cert(cert) == "User:CN=alice,OU=Eng,O=Org,L=SF,ST=CA,C=US"


def test_special_characters_escaped(tmp_path: Path) -> None:
    cert = _subject_of(tmp_path, "/O=Acme, Inc./CN=bob;x")
    assert principal_from_cert(cert) == "User:CN=bob\\;x,O=Acme\\, Inc."


def test_no_certificate_is_anonymous() -> None:
    assert principal_from_cert(None) == ANONYMOUS
