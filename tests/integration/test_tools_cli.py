"""The admin CLIs as operators run them (real processes) against a real kafkad (the session broker)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from kafkad.tools.partitioner import murmur2, to_positive

pytestmark = pytest.mark.integration


def tool(
    module: str, bootstrap: str, *argv: str, stdin: str = "", ok: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", f"kafkad.tools.{module}", "--bootstrap-server", bootstrap, *argv],
        input=stdin, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok:
        assert proc.returncode == 0, f"{module} {argv} -> {proc.returncode}\n{proc.stderr}"
    return proc


def new_topic() -> str:
    return f"tools-{uuid.uuid4().hex[:10]}"


def test_topic_lifecycle(bootstrap: str) -> None:
    t = new_topic()
    out = tool("topics", bootstrap, "--create", "--topic", t, "--partitions", "2", "--replication-factor", "1",
               "--config", "retention.ms=3600000").stdout  # fmt: skip
    assert out == f"Created topic {t}.\n"
    again = tool("topics", bootstrap, "--create", "--topic", t, "--partitions", "2", ok=False)
    assert again.returncode == 1 and "already exists" in again.stderr
    tool("topics", bootstrap, "--create", "--topic", t, "--partitions", "2", "--if-not-exists")
    assert t in tool("topics", bootstrap, "--list").stdout.splitlines()

    lines = tool("topics", bootstrap, "--describe", "--topic", t).stdout.splitlines()
    head = lines[0].split("\t")
    assert head[0] == f"Topic: {t}"
    assert head[1].startswith("TopicId: ") and len(head[1]) == len("TopicId: ") + 22  # KIP-516
    assert "PartitionCount: 2" in head and "ReplicationFactor: 1" in head
    assert any(f.startswith("Configs: ") and "retention.ms=3600000" in f for f in head)
    assert lines[1:] == [f"\tTopic: {t}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in (0, 1)]

    tool("topics", bootstrap, "--alter", "--topic", t, "--partitions", "3")
    assert "PartitionCount: 3" in tool("topics", bootstrap, "--describe", "--topic", t).stdout
    tool("topics", bootstrap, "--delete", "--topic", t)
    assert t not in tool("topics", bootstrap, "--list").stdout.splitlines()
    gone = tool("topics", bootstrap, "--describe", "--topic", t, ok=False)
    assert gone.returncode == 1 and "does not exist" in gone.stderr


def test_produce_keyed_lines_then_consume_from_beginning(bootstrap: str) -> None:
    t = new_topic()
    tool("topics", bootstrap, "--create", "--topic", t, "--partitions", "3", "--replication-factor", "1")
    sent = [(f"key{i}", f"value {i}") for i in range(50)]
    tool("console_producer", bootstrap, "--topic", t, "--property", "parse.key=true", "--property",
         "key.separator=:", "--compression-codec", stdin="".join(f"{k}:{v}\n" for k, v in sent))  # fmt: skip
    proc = tool("console_consumer", bootstrap, "--topic", t, "--from-beginning", "--max-messages", "50",
                "--timeout-ms", "120000", "--property", "print.key=true", "--property", "print.partition=true")  # fmt: skip
    assert "Processed a total of 50 messages" in proc.stderr
    got = [line.split("\t") for line in proc.stdout.splitlines()]
    assert sorted((k, v) for _, k, v in got) == sorted(sent)
    for part, key, _ in got:  # Java's default partitioner placement
        assert part == f"Partition:{to_positive(murmur2(key.encode())) % 3}"
    by_part: dict[str, list[int]] = {}
    for part, _, value in got:
        by_part.setdefault(part, []).append(int(value.split()[1]))
    assert all(v == sorted(v) for v in by_part.values())  # per-partition order kept

    offsets = tool("get_offsets", bootstrap, "--topic", t).stdout.splitlines()
    counts = {p: len(v) for p, v in by_part.items()}
    assert offsets == [f"{t}:{p}:{counts.get(f'Partition:{p}', 0)}" for p in range(3)]
    assert (
        tool("get_offsets", bootstrap, "--topic", t, "--time", "-2", "--partitions", "0").stdout
        == f"{t}:0:0\n"
    )


def test_kafka_python_reads_what_the_console_producer_wrote(bootstrap: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    t = new_topic()
    tool("topics", bootstrap, "--create", "--topic", t, "--partitions", "2", "--replication-factor", "1")
    tool("console_producer", bootstrap, "--topic", t, "--property", "parse.key=true", "--compression-codec", "zstd",
         stdin="k1\tv1\nk2\tv2\n")  # fmt: skip
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, consumer_timeout_ms=120_000, auto_offset_reset="earliest"
    )
    consumer.assign([TopicPartition(t, 0), TopicPartition(t, 1)])
    got = []
    for msg in consumer:
        got.append((msg.partition, msg.key, msg.value))
        if len(got) == 2:
            break
    consumer.close()
    assert sorted(got) == sorted(
        (to_positive(murmur2(k)) % 2, k, v) for k, v in ((b"k1", b"v1"), (b"k2", b"v2"))
    )


def test_consumer_group_resumes_from_committed_offsets(bootstrap: str) -> None:
    t, g = new_topic(), f"g-{uuid.uuid4().hex[:8]}"
    tool("topics", bootstrap, "--create", "--topic", t, "--partitions", "2", "--replication-factor", "1")
    tool("console_producer", bootstrap, "--topic", t, stdin="".join(f"m{i}\n" for i in range(6)))
    first = tool("console_consumer", bootstrap, "--topic", t, "--group", g, "--from-beginning",
                 "--max-messages", "4", "--timeout-ms", "120000")  # fmt: skip
    # The second member stops at the 2 records left (no idle timeout racing a slow join): had it started
    # over instead of at the committed offsets, it would have read records the first one already had.
    rest = tool("console_consumer", bootstrap, "--topic", t, "--group", g, "--from-beginning",
                "--max-messages", "2", "--timeout-ms", "120000")  # fmt: skip
    seen = first.stdout.splitlines() + rest.stdout.splitlines()
    assert sorted(seen) == [f"m{i}" for i in range(6)]
    assert "Processed a total of 2 messages" in rest.stderr
    assert len(rest.stdout.splitlines()) == 2


def test_configs_round_trip(bootstrap: str) -> None:
    t = new_topic()
    tool("topics", bootstrap, "--create", "--topic", t, "--partitions", "1", "--replication-factor", "1",
         "--config", "retention.ms=100000")  # fmt: skip
    tool("configs", bootstrap, "--alter", "--entity-type", "topics", "--entity-name", t,
         "--add-config", "segment.ms=600000,cleanup.policy=[compact,delete]")  # fmt: skip
    out = tool("configs", bootstrap, "--describe", "--topic", t).stdout.splitlines()
    assert out[0] == f"Dynamic configs for topic {t} are:"
    entries = {line.split()[0] for line in out[1:]}
    assert entries == {"retention.ms=100000", "segment.ms=600000", "cleanup.policy=compact,delete"}
    assert all(" sensitive=false synonyms={" in line for line in out[1:])

    assert tool("configs", bootstrap, "--alter", "--topic", t, "--delete-config", "retention.ms").stdout == (
        f"Completed updating config for topic {t}.\n"
    )
    described = tool("configs", bootstrap, "--describe", "--topic", t).stdout
    assert "retention.ms=" not in described and "segment.ms=600000" in described
    bad = tool("configs", bootstrap, "--alter", "--topic", t, "--delete-config", "not.set", ok=False)
    assert bad.returncode == 1 and "Invalid config(s): not.set" in bad.stderr
    assert "Dynamic configs for broker 0 are:" in tool("configs", bootstrap, "--describe", "--entity-type",
                                                        "brokers", "--entity-name", "0").stdout  # fmt: skip


def test_unreachable_broker_is_one_clear_line() -> None:
    from tests.integration.broker_process import free_port

    proc = tool("topics", f"127.0.0.1:{free_port()}", "--list", ok=False)
    assert proc.returncode == 1
    assert "could not be established" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
