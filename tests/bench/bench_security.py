"""Security costs, each against its baseline in the same run (issue 14, speed section):

1. Produce and Fetch over TLS against PLAINTEXT on one kafkad (the working tree's code): MB/s and broker
   CPU-seconds per GiB, `--runs` times alternating the order; confluent-kafka clients in this process.
2. SCRAM-SHA-256 authentications per second: the broker's side in-process (ScramServer, the two steps),
   and end to end (a fresh connection + ApiVersions + SaslHandshake + SaslAuthenticate x2 with kafkad's
   tool client, whose PBKDF2 of 4096 iterations is client CPU) with the broker's CPU per authentication.
3. The authorizer's cost per decision with 10,000 ACLs (cached and uncached), and Metadata requests per
   second on a broker with the authorizer and 10,000 ACLs against one without.

Prints min / median / max. Run: .venv/bin/python -m tests.bench.bench_security [--runs 3] [--mib 128]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka as ck
import psutil

from kafkad.security.acl import AclBinding, Authorizer, Operation, PatternType, Permission, ResourceType
from kafkad.security.scram import ScramClient, ScramServer, make_credential
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.pki import make_pki

GiB = 1 << 30
MiB = 1 << 20


def mmm(xs: list[float], fmt: str = "{:.1f}") -> str:
    return " / ".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))


def cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def produce(conf: dict[str, str], topic: str, mib: int) -> None:
    p = ck.Producer(
        {**conf, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1, "queue.buffering.max.kbytes": 1 << 20}
    )
    value = b"x" * 1024
    for _ in range(mib * 1024):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0


def consume(conf: dict[str, str], topic: str, count: int) -> None:
    c = ck.Consumer({**conf, "group.id": f"bench-{time.monotonic_ns()}", "enable.auto.commit": False,
                     "fetch.max.bytes": 50 * MiB, "max.partition.fetch.bytes": 8 * MiB})  # fmt: skip
    c.assign([ck.TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    c.close()
    assert got == count, (got, count)


def timed(pid: int, fn: Callable[[], None]) -> tuple[float, float]:
    c0, t0 = cpu(pid), time.perf_counter()
    fn()
    return time.perf_counter() - t0, cpu(pid) - c0


def bench_tls(base: Path, runs: int, mib: int) -> None:
    pki = make_pki(base / "pki")
    ssl_port = free_port()
    b = BrokerProcess(
        base / "tls",
        {
            "listeners": "PLAINTEXT://127.0.0.1:{p},SSL://127.0.0.1:" + str(ssl_port),
            "ssl.keystore.location": str(pki.server),
            "num.partitions": "1",
        },
    )
    b.overrides["listeners"] = b.overrides["listeners"].replace("{p}", str(b.port))
    b.start()
    try:
        assert b.proc is not None
        pid = b.proc.pid
        confs = {
            "PLAINTEXT": {"bootstrap.servers": b.bootstrap},
            "SSL": {
                "bootstrap.servers": f"127.0.0.1:{ssl_port}",
                "security.protocol": "SSL",
                "ssl.ca.location": str(pki.ca),
            },
        }
        rows: dict[str, dict[str, list[float]]] = {
            k: {"pmbs": [], "pcpu": [], "fmbs": [], "fcpu": []} for k in confs
        }
        for run in range(runs):
            order = list(confs) if run % 2 == 0 else list(reversed(confs))
            for name in order:
                topic = f"{name.lower()}-{run}"
                wall, c = timed(pid, lambda: produce(confs[name], topic, mib))  # noqa: B023
                rows[name]["pmbs"].append(mib / wall)
                rows[name]["pcpu"].append(c / (mib / 1024))
                wall, c = timed(pid, lambda: consume(confs[name], topic, mib * 1024))  # noqa: B023
                rows[name]["fmbs"].append(mib / wall)
                rows[name]["fcpu"].append(c / (mib / 1024))
        print(f"## Produce / Fetch, {mib} MiB of 1 KiB records, {runs} runs (min / median / max)")
        for name, r in rows.items():
            print(f"{name:10} produce {mmm(r['pmbs'])} MB/s, broker {mmm(r['pcpu'], '{:.2f}')} CPU-s/GiB")
            print(f"{name:10} fetch   {mmm(r['fmbs'])} MB/s, broker {mmm(r['fcpu'], '{:.2f}')} CPU-s/GiB")
        for what in ("pcpu", "fcpu"):
            ratios = [s / p for s, p in zip(rows["SSL"][what], rows["PLAINTEXT"][what], strict=True)]
            print(
                f"TLS / PLAINTEXT broker CPU per GiB ({'produce' if what == 'pcpu' else 'fetch'}): {mmm(ratios, '{:.2f}')}"
            )
    finally:
        b.stop()


def bench_scram(base: Path, runs: int) -> None:
    cred = make_credential("SCRAM-SHA-256", "pw", 4096)
    rates = []
    for _ in range(runs):
        n, spent = 300, 0.0
        for _ in range(n):
            client = ScramClient("SCRAM-SHA-256", "u", "pw")
            server = ScramServer("SCRAM-SHA-256", lambda _u: cred)
            first = client.first()
            t0 = time.perf_counter()
            server_first = server.step(first)
            spent += time.perf_counter() - t0
            final = client.final(server_first)
            t0 = time.perf_counter()
            client.verify(server.step(final))
            spent += time.perf_counter() - t0
        rates.append(n / spent)
    print(
        f"## SCRAM-SHA-256 (4096 iterations): broker-side steps {mmm(rates, '{:.0f}')} authentications/s (in-process)"
    )

    from kafkad.tools.client import KafkaClient
    from kafkad.tools.client_security import ClientSecurity

    port = free_port()
    b = BrokerProcess(
        base / "scram",
        {
            "listeners": "PLAINTEXT://127.0.0.1:{p},SASL_PLAINTEXT://127.0.0.1:" + str(port),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        },
    )
    b.overrides["listeners"] = b.overrides["listeners"].replace("{p}", str(b.port))
    b.start()
    try:
        assert b.proc is not None
        with KafkaClient(b.bootstrap) as admin:
            from kafkad.tools.scram_users import alter_users

            alter_users(admin, "u", {"SCRAM-SHA-256": (4096, "pw")}, [])
        sec = ClientSecurity.from_properties(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "u",
                "sasl.password": "pw",
            }
        )
        e2e, per_auth_cpu = [], []
        for _ in range(runs):
            n = 50
            c0, t0 = cpu(b.proc.pid), time.perf_counter()
            for _ in range(n):
                KafkaClient(f"127.0.0.1:{port}", security=sec).close()
            e2e.append(n / (time.perf_counter() - t0))
            per_auth_cpu.append((cpu(b.proc.pid) - c0) / n * 1000)
        print(f"   end to end (connect + ApiVersions + SCRAM, client PBKDF2 included): {mmm(e2e, '{:.0f}')} connections/s,"
              f" broker {mmm(per_auth_cpu, '{:.2f}')} CPU-ms per connection")  # fmt: skip
    finally:
        b.stop()


def bench_authorizer(base: Path, runs: int) -> None:
    acls = [
        AclBinding(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL, f"User:u{i % 100}", "*", Operation.READ, Permission.ALLOW)
        for i in range(9000)
    ] + [
        AclBinding(ResourceType.TOPIC, f"p{i}-", PatternType.PREFIXED, f"User:u{i}", "*", Operation.WRITE, Permission.ALLOW)
        for i in range(1000)
    ]  # fmt: skip
    a = Authorizer(acls)
    names = [f"topic-{i}" for i in range(9000)]
    unc, cached = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        for n in names:
            a._decide("User:u5", "1.2.3.4", Operation.READ, ResourceType.TOPIC, n)
        unc.append((time.perf_counter() - t0) / len(names) * 1e6)
        for n in names:
            a.authorize("User:u5", "1.2.3.4", Operation.READ, ResourceType.TOPIC, n)
        t0 = time.perf_counter()
        for n in names:
            a.authorize("User:u5", "1.2.3.4", Operation.READ, ResourceType.TOPIC, n)
        cached.append((time.perf_counter() - t0) / len(names) * 1e6)
    print(
        f"## Authorizer, 10,000 ACLs: uncached {mmm(unc, '{:.2f}')} us/decision, cached {mmm(cached, '{:.2f}')} us/decision"
    )

    from kafkad.security.acl_store import FileAclStore
    from tests.integration.raw_client import Raw

    def metadata_rate(b: BrokerProcess) -> float:
        r = Raw(b.port)
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            r.call(3, 1, {"topics": [{"name": "topic-5"}]})
        return n / (time.perf_counter() - t0)

    brokers = {}
    for name, extra in (
        ("none", {}),
        (
            "acl",
            {
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "allow.everyone.if.no.acl.found": "true",
            },
        ),
    ):
        b = BrokerProcess(base / f"authz-{name}", {"num.partitions": "1", **extra})
        (b.data_dir).mkdir(parents=True, exist_ok=True)
        # ANONYMOUS may describe topic-5 (and 9,999 other ACLs exist).
        FileAclStore(b.data_dir / "kafkad-acls.json")._save(
            [
                *acls,
                AclBinding(
                    ResourceType.TOPIC,
                    "*",
                    PatternType.LITERAL,
                    "User:ANONYMOUS",
                    "*",
                    Operation.ALL,
                    Permission.ALLOW,
                ),
            ]
        )
        b.start()
        brokers[name] = b
    try:
        rates: dict[str, list[float]] = {"none": [], "acl": []}
        for _ in range(runs):
            for name, b in brokers.items():
                rates[name].append(metadata_rate(b))
        print(f"   Metadata(1 topic) requests/s, no authorizer {mmm(rates['none'], '{:.0f}')}, "
              f"authorizer + 10,001 ACLs {mmm(rates['acl'], '{:.0f}')}")  # fmt: skip
    finally:
        for b in brokers.values():
            b.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--only", choices=["tls", "scram", "authz"], default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkad-bench-sec-") as d:
        base = Path(d)
        if args.only in (None, "authz"):
            bench_authorizer(base, args.runs)
        if args.only in (None, "scram"):
            bench_scram(base, args.runs)
        if args.only in (None, "tls"):
            bench_tls(base, args.runs, args.mib)


if __name__ == "__main__":
    main()
