"""The ZooKeeper client's security settings: Kafka's JAAS files and KAFKA_OPTS, what is refused and why, and
the ACL each path is created with (Kafka's ZkData.defaultAcls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.config.broker_config import ConfigError, load_config
from kafkad.security.settings import SecurityConfigError
from kafkad.zk.acls import default_acls, sensitive_path
from kafkad.zk.security import (
    build_zk_security,
    kafka_opts_properties,
    parse_jaas_file,
)

JAAS = """
// comment { not a section }
KafkaServer {
   org.apache.kafka.common.security.plain.PlainLoginModule required
   username="admin" password="a;b}c" user_admin="x";
};
/* ZooKeeper */
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="kafka"
  password="kafka \\"secret\\"";
};
"""


def test_jaas_file_sections_and_quoted_values() -> None:
    s = parse_jaas_file(JAAS)
    assert list(s) == ["KafkaServer", "Client"]
    assert s["KafkaServer"][0].options["password"] == "a;b}c"
    client = s["Client"][0]
    assert client.module == "org.apache.zookeeper.server.auth.DigestLoginModule" and client.flag == "required"
    assert client.options == {"username": "kafka", "password": 'kafka "secret"'}


@pytest.mark.parametrize(
    "text",
    ["Client { m required u=1 };", "Client { m sometimes; };", "Client { m required u=1; }", 'Client { "x }'],
)
def test_malformed_jaas_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_jaas_file(text)


def test_kafka_opts_system_properties() -> None:
    got = kafka_opts_properties(
        "-Xmx1G -Djava.security.auth.login.config='/etc/kafka/my jaas.conf' -Dzookeeper.sasl.client=true"
    )
    assert got == {
        "java.security.auth.login.config": "/etc/kafka/my jaas.conf",
        "zookeeper.sasl.client": "true",
    }


def _jaas(tmp_path: Path, text: str = JAAS, name: str = "jaas.conf") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_sasl_from_kafka_opts_or_the_key(tmp_path: Path) -> None:
    jaas = _jaas(tmp_path)
    sec = build_zk_security({}, {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
    assert sec.sasl is not None and sec.sasl.username == "kafka" and "KAFKA_OPTS" in sec.sasl.where
    assert sec.authenticated and not sec.set_acl
    sec = build_zk_security({"java.security.auth.login.config": str(jaas), "zookeeper.set.acl": True}, {})
    assert sec.sasl is not None and sec.set_acl
    # a JAAS file for the listeners only: no SASL to ZooKeeper, as Kafka
    only = _jaas(tmp_path, "KafkaServer { m required a=1; };", "listeners.conf")
    assert build_zk_security({"java.security.auth.login.config": str(only)}, {}).sasl is None
    # -Dzookeeper.sasl.clientconfig names the section: KafkaServer has no DigestLoginModule
    with pytest.raises(
        SecurityConfigError,
        match=r"the KafkaServer section of .* with org\.apache\.zookeeper\.server\.auth\.DigestLoginModule only",
    ):
        build_zk_security(
            {"java.security.auth.login.config": str(jaas)},
            {"KAFKA_OPTS": "-Dzookeeper.sasl.clientconfig=KafkaServer"},
        )


def test_refusals_name_the_key(tmp_path: Path) -> None:
    def refused(values: dict[str, object], env: dict[str, str] | None = None) -> SecurityConfigError:
        with pytest.raises(SecurityConfigError) as e:
            build_zk_security(values, env or {})  # type: ignore[arg-type]
        return e.value

    assert refused({"zookeeper.set.acl": True}).key == "zookeeper.set.acl"
    assert refused({"java.security.auth.login.config": str(tmp_path / "missing")}).key == (
        "java.security.auth.login.config"
    )
    jaas = _jaas(tmp_path)
    e = refused({"java.security.auth.login.config": str(jaas), "zookeeper.sasl.client": False})
    assert e.key == "zookeeper.sasl.client"
    krb = _jaas(
        tmp_path,
        "Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };",
        "krb.conf",
    )
    assert "DigestLoginModule only" in refused({"java.security.auth.login.config": str(krb)}).message
    tls = {"zookeeper.ssl.client.enable": True}
    assert (
        refused({**tls, "zookeeper.ssl.keystore.location": str(jaas)}).key
        == "zookeeper.ssl.keystore.location"
    )
    assert refused({**tls, "zookeeper.ssl.ocsp.enable": True}).key == "zookeeper.ssl.ocsp.enable"
    # TLS without a client certificate is no identity for the ACLs
    assert refused({**tls, "zookeeper.set.acl": True}).key == "zookeeper.set.acl"


def test_broker_config_refuses_unknown_zookeeper_ssl_keys(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("zookeeper.connect=127.0.0.1:2181\nbroker.id=1\nzookeeper.ssl.client.enabled=true\n")
    with pytest.raises(ConfigError) as e:
        load_config(str(props), [])
    assert e.value.key == "zookeeper.ssl.client.enabled" and e.value.line == 3
    props.write_text("zookeeper.connect=127.0.0.1:2181\nbroker.id=1\nzookeeper.set.acl=true\n")
    with pytest.raises(ConfigError) as e:
        load_config(str(props), [])
    assert e.value.key == "zookeeper.set.acl" and e.value.line == 3


def test_default_acls_are_kafkas() -> None:
    def ids(secure: bool, path: str) -> list[tuple[str, str, int]]:
        return [(a.id.scheme, a.id.id, a.perms) for a in default_acls(secure, path)]

    assert ids(False, "/config/users/alice") == [("world", "anyone", 31)]
    assert ids(True, "/brokers/topics/t") == [("auth", "", 31), ("world", "anyone", 1)]
    assert ids(True, "/") == [("auth", "", 31), ("world", "anyone", 1)]
    for p in ("/config/users", "/config/users/alice", "/config/brokers/1", "/delegation_token/tokens/x"):
        assert sensitive_path(p) and ids(True, p) == [("auth", "", 31)]
    assert not sensitive_path("/config/topics/t") and not sensitive_path("/delegation_token")
    assert ids(True, "/consumers") == [("world", "anyone", 31)]
