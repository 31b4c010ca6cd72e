"""TLS and SASL listeners with real clients: confluent-kafka, kafka-python and kcat over SSL, SASL_PLAINTEXT and
SASL_SSL with PLAIN and SCRAM (produce, consume in a group); refusals (wrong password, expired certificate,
unknown CA, plaintext to a TLS port, requests before authentication), each leaving the broker serving; the
certificate reloaded on SIGHUP; SCRAM users managed with kafkad-configs."""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from tests.integration.broker_process import free_port
from tests.integration.raw_client import Raw
from tests.integration.secure_broker import SecureBroker, configs, start_secure

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    s = start_secure(
        tmp_path_factory.mktemp("secure"), {"metrics.listeners": f"https://127.0.0.1:{METRICS_PORT}"}
    )
    try:
        yield s
    finally:
        s.broker.stop()


def serving(sb: SecureBroker) -> None:
    """The broker is alive and answers on PLAINTEXT."""
    assert sb.broker.running, sb.broker.log_text()[-3000:]
    r = Raw(sb.ports["PLAINTEXT"])
    assert r.call(18, 0, {})["error_code"] == 0


def roundtrip_confluent(conf: dict[str, str], n: int = 20) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    errors: list[object] = []
    p = ck.Producer({**conf, "acks": "all"})
    for i in range(n):
        p.produce(
            topic,
            f"v{i}".encode(),
            key=f"k{i}".encode(),
            on_delivery=lambda e, _m: errors.append(e) if e else None,
        )
    assert p.flush(60) == 0 and not errors, errors
    c = ck.Consumer(
        {**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None and (value := m.value()) is not None:
            got.append(value)
    c.commit(asynchronous=False)
    committed = c.committed([ck.TopicPartition(topic, p) for p in range(2)], timeout=30)
    c.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(n))
    assert sum(max(tp.offset, 0) for tp in committed) == n


@pytest.mark.parametrize(
    ("listener", "extra"),
    [
        ("SSL", {}),
        (
            "SASL_PLAINTEXT",
            {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"},
        ),
        ("SASL_SSL", {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}),
        (
            "SASL_PLAINTEXT",
            {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": "bob-secret"},
        ),
        (
            "SASL_SSL",
            {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-secret"},
        ),
    ],
    ids=["ssl", "sasl_plaintext-plain", "sasl_ssl-plain", "sasl_plaintext-scram256", "sasl_ssl-scram512"],
)
def test_confluent_kafka(sb: SecureBroker, listener: str, extra: dict[str, str]) -> None:
    roundtrip_confluent(sb.conf(listener, **extra))


def test_confluent_mutual_tls(sb: SecureBroker) -> None:
    cert, key = sb.pki.client("carol")
    roundtrip_confluent(
        sb.conf("MTLS", **{"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
    )


@pytest.mark.parametrize(
    ("listener", "mech", "user", "password"),
    [
        ("SSL", None, None, None),
        ("SASL_SSL", "PLAIN", "alice", "alice-secret"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-secret"),
        ("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret"),
    ],
)
def test_kafka_python(
    sb: SecureBroker, listener: str, mech: str | None, user: str | None, password: str | None
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    kw: dict[str, object] = {
        "bootstrap_servers": f"127.0.0.1:{sb.ports[listener]}",
        "security_protocol": listener,
    }
    if "SSL" in listener:
        kw["ssl_cafile"] = str(sb.pki.ca)
    if mech:
        kw.update(sasl_mechanism=mech, sasl_plain_username=user, sasl_plain_password=password)
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(**kw)
    for i in range(10):
        p.send(topic, f"m{i}".encode())
    p.flush(60)
    p.close()
    c = KafkaConsumer(
        topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=30000, **kw
    )
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 10:
            break
    c.commit()
    c.close()
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(10))


def _kcat(*args: str) -> subprocess.CompletedProcess[str]:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is required (apt install kcat)"
    return subprocess.run([kcat, *args], capture_output=True, text=True, timeout=90)


@pytest.mark.parametrize(
    ("listener", "sasl"),
    [
        ("SSL", []),
        (
            "SASL_SSL",
            [
                "-X",
                "sasl.mechanism=SCRAM-SHA-256",
                "-X",
                "sasl.username=bob",
                "-X",
                "sasl.password=bob-secret",
            ],
        ),
    ],
)
def test_kcat(sb: SecureBroker, listener: str, sasl: list[str]) -> None:
    topic = f"kc-{uuid.uuid4().hex[:8]}"
    common = [
        "-b",
        f"127.0.0.1:{sb.ports[listener]}",
        "-X",
        f"security.protocol={listener}",
        "-X",
        f"ssl.ca.location={sb.pki.ca}",
        *sasl,
    ]
    p = subprocess.run(
        [shutil.which("kcat") or "kcat", "-P", "-t", topic, *common],
        input="a\nb\nc\n",
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert p.returncode == 0, p.stderr
    r = _kcat("-C", "-t", topic, "-o", "beginning", "-c", "3", "-e", *common)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["a", "b", "c"]


def test_wrong_password_refused_and_broker_serves(sb: SecureBroker) -> None:
    for mech, user in (("PLAIN", "alice"), ("SCRAM-SHA-256", "bob"), ("SCRAM-SHA-256", "nobody")):
        errors: list[ck.KafkaError] = []
        conf = sb.conf(
            "SASL_SSL", **{"sasl.mechanism": mech, "sasl.username": user, "sasl.password": "wrong"}
        )
        p = ck.Producer({**conf, "error_cb": errors.append, "log_level": 0})
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            p.poll(0.2)
        assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION, errors
        assert "Authentication failed" in errors[0].str()
        del p
    serving(sb)
    raw = Raw(sb.ports["SASL_PLAINTEXT"])  # SaslAuthenticate answers SASL_AUTHENTICATION_FAILED, then closes
    assert raw.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    resp = raw.call(36, 1, {"auth_bytes": b"\0alice\0nope"})
    assert resp["error_code"] == 58 and "Authentication failed" in resp["error_message"]
    with pytest.raises((EOFError, ConnectionError)):
        raw.recv_frame()


def test_unauthenticated_requests_get_nothing(sb: SecureBroker) -> None:
    raw = Raw(sb.ports["SASL_PLAINTEXT"])
    assert raw.call(18, 0, {})["error_code"] == 0  # ApiVersions is allowed before authentication
    hs = raw.call(17, 1, {"mechanism": "GSSAPI"})
    assert hs["error_code"] == 33 and "PLAIN" in hs["mechanisms"]  # UNSUPPORTED_SASL_MECHANISM
    raw = Raw(sb.ports["SASL_PLAINTEXT"])
    raw.corr += 1
    from kafkad.protocol import RequestHeader, encode_request

    raw.send_raw(encode_request(RequestHeader(3, 1, 7, "x"), {"topics": None}))  # Metadata, unauthenticated
    with pytest.raises((EOFError, ConnectionError)):
        raw.recv_frame()
    serving(sb)


def test_sasl_handshake_v0_bare_tokens(sb: SecureBroker) -> None:
    raw = Raw(sb.ports["SASL_PLAINTEXT"])
    assert raw.call(17, 0, {"mechanism": "PLAIN"})["error_code"] == 0
    raw.send_frame(b"\0alice\0alice-secret")
    assert raw.recv_frame() == b""  # PLAIN's empty final challenge, size-prefixed
    assert raw.call(3, 1, {"topics": None})["brokers"]


def _tls_connect(port: int, ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    tls = ctx.wrap_socket(s, server_hostname="127.0.0.1")
    # TLS 1.3: the server checks the client certificate after the client's handshake finished; a request
    # round trip shows whether the server accepted it.
    tls.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
    size = tls.recv(4)
    if len(size) < 4:
        raise ConnectionError("closed by the broker")
    return tls


def test_mtls_refuses_expired_unknown_ca_and_missing_cert(sb: SecureBroker, tmp_path: Path) -> None:
    port, ca = sb.ports["MTLS"], sb.pki.ca
    good_cert, good_key = sb.pki.client("dave")
    _tls_connect(port, ca, good_cert, good_key).close()
    expired = sb.pki.client("old", expired=True)
    sb.pki.other_ca("rogue")
    rogue = sb.pki.client("mallory", ca="rogue")
    for cert, key in (expired, rogue, (None, None)):
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            _tls_connect(port, ca, cert, key)
    # A client that does not trust the broker's CA refuses it too.
    other = sb.pki.other_ca("elsewhere")
    with pytest.raises(ssl.SSLCertVerificationError):
        _tls_connect(sb.ports["SSL"], other)
    serving(sb)
    _tls_connect(port, ca, good_cert, good_key).close()


def test_plaintext_to_tls_port(sb: SecureBroker) -> None:
    raw = Raw(sb.ports["SSL"])
    raw.sock.settimeout(30)
    raw.send_raw(struct.pack(">ihhih", 10, 18, 0, 1, -1))  # an ApiVersions request, unencrypted
    with pytest.raises((EOFError, ConnectionError)):
        raw.recv_frame()
    serving(sb)
    _tls_connect(sb.ports["SSL"], sb.pki.ca).close()


def test_certificate_reloaded_on_sighup(sb: SecureBroker) -> None:
    def serial() -> int:
        ctx = ssl.create_default_context(cafile=str(sb.pki.ca))
        s = socket.create_connection(("127.0.0.1", sb.ports["SSL"]), timeout=30)
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            der = t.getpeercert(binary_form=True)
        assert der
        return hash(der)

    before = serial()
    cert, key = sb.pki.server_cert_again("server2")
    tmp = sb.pki.server.with_suffix(".new")
    tmp.write_text(key.read_text() + cert.read_text())
    tmp.replace(sb.pki.server)
    assert sb.broker.proc is not None
    sb.broker.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 30
    while serial() == before:
        assert time.monotonic() < deadline, "certificate not reloaded:\n" + sb.broker.log_text()[-2000:]
        time.sleep(0.1)
    assert "certificates reloaded" in sb.broker.log_text()
    serving(sb)


def test_scram_users_with_kafkad_configs(sb: SecureBroker, tmp_path: Path) -> None:
    configs(
        sb,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "erin",
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=erin-secret],SCRAM-SHA-512=[password=x]",
    )
    out = configs(sb, "--describe", "--entity-type", "users", "--entity-name", "erin")
    assert "SCRAM-SHA-256=iterations=8192" in out and "SCRAM-SHA-512=iterations=4096" in out
    stored = (sb.broker.data_dir / "kafkad-scram-credentials.json").read_text()
    assert "erin-secret" not in stored and "stored_key=" in stored
    # The tool itself over SASL_SSL with SCRAM, from a Kafka client properties file.
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.location={sb.pki.ca}\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="erin" password="erin-secret";\n'
    )
    out = configs(sb, "--describe", "--entity-type", "users", listener="SASL_SSL", command_config=props)
    assert "erin" in out and "bob" in out
    roundtrip_confluent(
        sb.conf(
            "SASL_SSL", **{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "erin", "sasl.password": "x"}
        ),
        n=3,
    )
    configs(
        sb, "--alter", "--entity-type", "users", "--entity-name", "erin", "--delete-config", "SCRAM-SHA-512"
    )
    assert "SCRAM-SHA-512" not in configs(sb, "--describe", "--entity-type", "users", "--entity-name", "erin")


def test_metrics_and_healthz_over_tls(sb: SecureBroker) -> None:
    import urllib.request

    ctx = ssl.create_default_context(cafile=str(sb.pki.ca))
    url = f"https://127.0.0.1:{METRICS_PORT}"
    with urllib.request.urlopen(f"{url}/healthz", context=ctx, timeout=30) as r:
        assert r.status == 200
    with urllib.request.urlopen(f"{url}/metrics", context=ctx, timeout=30) as r:
        assert b"kafka" in r.read()
    with pytest.raises(OSError):  # plain HTTP to the TLS endpoint gets no answer
        urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/healthz", timeout=10).read()
