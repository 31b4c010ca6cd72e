"""Security keys as a Kafka user writes them: accepted, or refused at start with file, line and key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kafkad.config.broker_config import ConfigError, load_config
from kafkad.security.settings import Protocol, SecurityConfigError, parse_jaas


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pem")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    (d / "ks.pem").write_text((d / "cert.pem").read_text() + (d / "key.pem").read_text())
    return d


def props(tmp_path: Path, pem: Path, *extra: str) -> Path:
    f = tmp_path / "server.properties"
    f.write_text(
        "\n".join(
            [
                "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
                "ssl.keystore.type=PEM",
                f"ssl.keystore.location={pem / 'ks.pem'}",
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
                "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
                'PlainLoginModule required \\\n  username="admin" password="admin-secret" \\\n'
                '  user_admin="admin-secret" user_alice="alice-secret";',
                "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                "super.users=User:admin;User:bob",
                *extra,
            ]
        )
        + "\n"
    )
    return f


def test_kafka_properties_file_as_written(tmp_path: Path, pem: Path) -> None:
    c = load_config(props(tmp_path, pem)).security
    assert c.listeners["PLAINTEXT"].protocol is Protocol.PLAINTEXT
    assert c.listeners["SSL"].protocol is Protocol.SSL and c.listeners["SSL"].tls is not None
    sasl = c.listeners["SASL_SSL"]
    assert sasl.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert dict(sasl.plain_users) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert c.authorizer and c.super_users == {"User:admin", "User:bob"} and not c.allow_if_no_acl
    assert load_config(None, ["listeners=PLAINTEXT://:0"]).security.plaintext_only


def test_inline_pem_and_listener_overrides(tmp_path: Path, pem: Path) -> None:
    chain = (pem / "cert.pem").read_text().replace("\n", "\\n")
    key = (pem / "key.pem").read_text().replace("\n", "\\n")
    c = load_config(
        None,
        [
            "listeners=CLIENTS://127.0.0.1:9093",
            "listener.security.protocol.map=CLIENTS:SSL",
            f"listener.name.clients.ssl.keystore.key={key}",
            f"listener.name.clients.ssl.keystore.certificate.chain={chain}",
            f"ssl.truststore.location={pem / 'cert.pem'}",
            "listener.name.clients.ssl.client.auth=required",
        ],
    ).security
    tls = c.listeners["CLIENTS"].tls
    assert tls is not None and tls.client_auth == "required" and tls.keystore_key is not None


@pytest.mark.parametrize(
    ("line", "key", "what"),
    [
        ("ssl.keystore.type=JKS", "ssl.keystore.type", "PEM"),
        ("sasl.kerberos.service.name=kafka", "sasl.kerberos.service.name", "cannot honour"),
        ("ssl.keymanager.algorithm=SunX509", "ssl.keymanager.algorithm", "cannot honour"),
        ("sasl.enabled.mechanisms=GSSAPI", "sasl.enabled.mechanisms", "unsupported SASL mechanism GSSAPI"),
        ("authorizer.class.name=com.example.Authz", "authorizer.class.name", "must be one of"),
        ("listener.name.sasl_ssl.foo.bar=1", "listener.name.sasl_ssl.foo.bar", "cannot honour"),
        ("listener.name.nope.ssl.client.auth=required", "listener.name.nope.ssl.client.auth", "no listener"),
        ("ssl.keystore.password=x", "ssl.keystore.password", "PEM key store takes no password"),
        ("ssl.client.auth=required", "ssl.client.auth", "needs a trust store"),
        ("ssl.enabled.protocols=TLSv1.1", "ssl.enabled.protocols", "must be one of"),
        ("ssl.cipher.suites=TLS_NOPE_WITH_NOTHING", "ssl.cipher.suites", "cipher suite"),
        ("ssl.cipher.suites=TLS_AES_128_GCM_SHA256", "ssl.cipher.suites", "TLS 1.3"),
        ("super.users=admin", "super.users", "not a principal"),
        (
            "listener.name.sasl_ssl.plain.sasl.jaas.config=com.example.Login required;",
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "PlainLoginModule",
        ),
        (
            'listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b"',
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "must end with ';'",
        ),
    ],
)
def test_refused_with_file_line_key(tmp_path: Path, pem: Path, line: str, key: str, what: str) -> None:
    f = props(tmp_path, pem, line)
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert f"{f}:" in str(e.value) and f": {key}: " in str(e.value) and what in str(e.value), str(e.value)
    assert e.value.line == len(f.read_text().splitlines())


def test_sasl_listener_needs_mechanisms_and_plain_users(pem: Path) -> None:
    with pytest.raises(ConfigError, match=r"sasl\.enabled\.mechanisms: listener SASL_PLAINTEXT"):
        load_config(None, ["listeners=SASL_PLAINTEXT://:9092"])
    with pytest.raises(
        ConfigError, match=r"plain\.sasl\.jaas\.config: listener SASL_PLAINTEXT enables PLAIN"
    ):
        load_config(None, ["listeners=SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms=PLAIN"])
    # SCRAM users live in the credential store, not the JAAS entry: none needed.
    c = load_config(None, ["listeners=SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms=SCRAM-SHA-512"])
    assert c.security.listeners["SASL_PLAINTEXT"].mechanisms == ("SCRAM-SHA-512",)


def test_jaas_parsing() -> None:
    e = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=admin "
        'password="p w\\"x" user_admin="p w\\"x";',
        "k",
    )
    assert e.flag == "required" and e.options == {
        "username": "admin",
        "password": 'p w"x',
        "user_admin": 'p w"x',
    }
    with pytest.raises(SecurityConfigError):
        parse_jaas("nonsense", "k")


def test_check_config_hides_passwords(tmp_path: Path, pem: Path) -> None:
    from kafkad.config.docs import check_config_lines

    lines = check_config_lines(load_config(props(tmp_path, pem, "ssl.key.password=topsecret")))
    assert "ssl.key.password=[hidden]" in "\n".join(lines) and "topsecret" not in "\n".join(lines)


def test_inter_broker_listener(tmp_path: Path, pem: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"security\.inter\.broker\.protocol: no listener named SASL_PLAINTEXT"
    ):
        load_config(props(tmp_path, pem, "security.inter.broker.protocol=SASL_PLAINTEXT"))
    with pytest.raises(
        ConfigError, match=r"sasl\.jaas\.config: brokers log in to SASL_SSL with SCRAM-SHA-256"
    ):
        load_config(
            props(
                tmp_path,
                pem,
                "inter.broker.listener.name=SASL_SSL",
                "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
            )
        )
    ib = load_config(props(tmp_path, pem, "inter.broker.listener.name=SASL_SSL")).security.inter_broker
    assert ib is not None
    assert (ib.listener, ib.mechanism, ib.username, ib.password) == (
        "SASL_SSL",
        "PLAIN",
        "admin",
        "admin-secret",
    )
    assert ib.tls is not None and ib.protocol is Protocol.SASL_SSL
    with pytest.raises(ConfigError, match=r"listeners: cluster mode without a PLAINTEXT listener"):
        load_config(
            None,
            ["listeners=SSL://127.0.0.1:9093", f"ssl.keystore.location={pem / 'ks.pem'}",
             "zookeeper.connect=127.0.0.1:2181", "broker.id=1"],
        )  # fmt: skip
