"""The bridge over S3: shipper and ingest against moto's S3 server on 127.0.0.1 (see s3_server.py).

Endpoint, region and credentials come from the standard AWS environment (`AWS_ENDPOINT_URL`, set per
test; the static keys of `STATIC_ENV`, set at import so the session's Spark workers have them) or from
kafkad's overrides. Every test creates its own bucket.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from kafkad.clock import ManualClock
from kafkad.spark_bridge.damaged import DamagedLanding
from kafkad.spark_bridge.ingest import main as ingest_main
from kafkad.spark_bridge.ingest import read_ledger, run_ingest
from kafkad.spark_bridge.landing import open_landing
from kafkad.spark_bridge.manifest import Manifest
from kafkad.spark_bridge.position import LocalPositionStore
from kafkad.spark_bridge.s3 import S3Options
from kafkad.spark_bridge.segment_source import DirectorySegmentSource
from kafkad.spark_bridge.shipper import Shipper, ShipperConfig
from kafkad.storage.records import Compression, build_batch
from tests.spark.conftest import spark_env
from tests.spark.helpers import SITE, Row, expected_rows, parquet_rows, write_logs
from tests.spark.s3_server import STATIC_ENV, FlakyProxy, MotoS3, moto_s3
from tests.spark.test_cluster import SPARK_HOME, cluster  # noqa: F401  (the standalone cluster fixture)
from tests.unit.spark_bridge.factory import BASE_TS, Expected, make_record

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
os.environ.update(STATIC_ENV)  # before the session's Spark starts: its workers inherit it


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3]:
    with moto_s3() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        yield server


def s3_shipper(logs: Path, uri: str, s3: S3Options | None = None, **config: Any) -> Shipper:
    return Shipper(
        ShipperConfig(site=SITE, **config),
        DirectorySegmentSource([logs]),
        open_landing(uri, s3),
        LocalPositionStore.in_dir(logs),
        clock=ManualClock(),
    )


def objects(server: MotoS3, bucket: str) -> dict[str, bytes]:
    """Every object of the bucket (hidden temp objects too), by key."""
    client: Any = server.client()
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            out[o["Key"]] = client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
    return out


def check_landing(server: MotoS3, bucket: str, prefix: str = "landing/") -> int:
    """Every manifest's .log is whole (size and CRC); no temp object left over. Returns the segments."""
    objs = {k[len(prefix) :]: v for k, v in objects(server, bucket).items() if k.startswith(prefix)}
    assert not [k for k in objs if k.rsplit("/", 1)[-1].startswith(".")], sorted(objs)
    count = 0
    for name, data in objs.items():
        if name.endswith(".manifest.json"):
            m = Manifest.from_json(data)
            log = objs[m.log_name]
            assert (len(log), crc32c(log)) == (m.size, m.crc32c), name
            count += 1
    return count


def write_big_segment(logs: Path, mib: int = 24) -> list[Row]:
    """`big-0`: one closed segment of about `mib` MiB (1 KiB values, uncompressed): a multipart upload."""
    pdir = logs / "big-0"
    pdir.mkdir(parents=True)
    out = bytearray()
    expected: list[Expected] = []
    offset = 0
    while len(out) < mib << 20:
        recs = [make_record("big", 0, offset + i, BASE_TS + offset + i, value_size=1024) for i in range(100)]
        out += build_batch(recs, compression=Compression.NONE, base_offset=offset)
        expected += [
            Expected("big", 0, offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(recs)
        ]
        offset += len(recs)
    (pdir / f"{0:020d}.log").write_bytes(bytes(out))
    (pdir / f"{offset:020d}.log").write_bytes(b"")
    return expected_rows(expected)


def test_ship_and_ingest_through_s3_with_the_aws_environment(tmp_path: Path, spark: Any, s3: MotoS3) -> None:
    logs, output = tmp_path / "logs", tmp_path / "out"
    expected = expected_rows(write_logs(logs))
    uri = "s3://missing-bucket/landing"
    with pytest.raises(FileNotFoundError, match="bucket missing-bucket of landing s3://missing-bucket"):
        open_landing(uri).check()
    assert ingest_main(["--landing", uri, "--output", str(output)]) == 2  # before Spark starts

    bucket = s3.create_bucket()
    uri = f"s3://{bucket}/landing"  # no object under the prefix yet: a bucket is all it needs
    shipper = s3_shipper(logs, uri)
    results = shipper.run_once()
    assert len(results) == 15 and all(r.copied for r in results) and shipper.failures == 0
    assert shipper.run_once() == []
    assert check_landing(s3, bucket) == 15
    summary = run_ingest(spark, uri, output)
    assert parquet_rows(output) == expected
    assert sum(t.records for t in summary.topics) == len(expected)
    assert run_ingest(spark, uri, output).topics == ()  # nothing new
    assert parquet_rows(output) == expected


def test_settings_override_the_aws_environment(
    tmp_path: Path, spark: Any, s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong AWS_ENDPOINT_URL in the environment, the right one as a setting: shipping and ingest work."""
    logs, output = tmp_path / "logs", tmp_path / "out"
    expected = expected_rows(write_logs(logs))
    bucket = s3.create_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    uri = f"s3://{bucket}/landing"
    with pytest.raises(OSError):
        open_landing(uri).check()
    options = S3Options(endpoint_url=s3.endpoint, region="eu-west-3")
    shipper = s3_shipper(logs, uri, options)
    assert len(shipper.run_once()) == 15 and shipper.failures == 0
    assert "region=eu-west-3" in open_landing(uri, options).uri
    run_ingest(spark, uri, output, s3=S3Options(endpoint_url=s3.endpoint))
    assert parquet_rows(output) == expected


def test_shipper_killed_mid_upload_leaves_nothing_the_ingest_takes(
    tmp_path: Path, spark: Any, s3: MotoS3
) -> None:
    logs, output = tmp_path / "logs", tmp_path / "out"
    expected = sorted(write_big_segment(logs) + expected_rows(write_logs(logs)))
    bucket = s3.create_bucket()
    uri = f"s3://{bucket}/landing"
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from kafkad.spark_bridge.landing import open_landing
        from kafkad.spark_bridge.segment_source import DirectorySegmentSource
        from kafkad.spark_bridge.position import LocalPositionStore
        from kafkad.spark_bridge.shipper import Shipper, ShipperConfig
        def hook(seg, copied):
            if seg.topic == "big" and copied >= 18 << 20:  # well into the multipart upload
                os.kill(os.getpid(), signal.SIGKILL)
        logs = Path({str(logs)!r})
        Shipper(ShipperConfig(site={SITE!r}), DirectorySegmentSource([logs]), open_landing({uri!r}),
                LocalPositionStore.in_dir(logs), copy_hook=hook).run_once()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=spark_env(), timeout=300)
    assert proc.returncode == -signal.SIGKILL
    client: Any = s3.client()
    uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    # The interrupted upload of the big segment: begun under its final key, never completed, unlisted.
    assert [u["Key"].rsplit("/", 2)[0] for u in uploads] == [f"landing/site={SITE}/big"], uploads
    landed = objects(s3, bucket)
    assert not [k for k in landed if "/big/" in k], sorted(landed)  # nothing of the segment visible
    check_landing(s3, bucket)

    shipper = s3_shipper(logs, uri)
    assert shipper.run_once() and shipper.run_once() == []
    assert check_landing(s3, bucket) == 16
    run_ingest(spark, uri, output)
    assert parquet_rows(output) == expected


def test_endpoint_down_and_failing_requests_delay_shipping_and_lose_nothing(
    tmp_path: Path, spark: Any, s3: MotoS3
) -> None:
    """Through a proxy failing 5 % of requests; the endpoint goes down mid-upload (the proxy refuses every
    connection and cuts the open ones) and comes back after four backoffs. The proxy, not moto, goes down:
    moto's ThreadedMotoServer restarted on the same port sometimes listens without serving, and the
    shipper then (rightly) retried forever."""
    logs, output = tmp_path / "logs", tmp_path / "out"
    expected = sorted(write_big_segment(logs, 12) + expected_rows(write_logs(logs)))
    bucket = s3.create_bucket()
    proxy = FlakyProxy(s3.port, 0.05)
    uri = f"s3://{bucket}/landing"
    shipper = s3_shipper(logs, uri, S3Options(endpoint_url=proxy.endpoint), copy_chunk_bytes=1 << 20)
    waits: list[float] = []
    max_waits = 500
    stopped: list[int] = []  # how many backoffs the proxy's failures had caused before the stop

    def hook(seg: Any, copied: int) -> None:
        if seg.topic == "big" and copied >= 6 << 20 and not stopped:
            stopped.append(len(waits))
            proxy.go_down()  # mid-upload

    def sleep(seconds: float) -> bool:
        waits.append(seconds)
        if stopped and len(waits) == stopped[0] + 4:
            proxy.down = False  # back, after four backoffs while down
        # bounded: a landing that never comes back fails the test instead of hanging it
        return len(waits) < max_waits

    shipper._copy_hook = hook
    shipper._sleep = sleep
    try:
        results = shipper.run_once()
        assert shipper.run_once() == []
    finally:
        proxy.close()
    assert stopped and len(waits) >= stopped[0] + 4 and shipper.failures >= 4
    down = waits[stopped[0] : stopped[0] + 4]
    assert down == sorted(down) and down[0] < down[-1]  # exponential backoff while down
    assert proxy.killed > 0 and proxy.requests > 100
    assert len({r.segment.path for r in results if r.manifest is not None}) == 16
    assert check_landing(s3, bucket) == 16
    run_ingest(spark, uri, output)
    assert parquet_rows(output) == expected


def test_damaged_and_foreign_objects_are_named_then_quarantined(
    tmp_path: Path, spark: Any, s3: MotoS3
) -> None:
    logs, output = tmp_path / "logs", tmp_path / "out"
    expected = expected_rows(write_logs(logs))
    bucket = s3.create_bucket()
    uri = f"s3://{bucket}/landing"
    s3_shipper(logs, uri).run_once()
    client: Any = s3.client()
    landed = sorted(k for k in objects(s3, bucket) if k.endswith(".log"))
    flipped = landed[3]  # same size, one byte flipped: found by an executor's CRC check
    body = bytearray(client.get_object(Bucket=bucket, Key=flipped)["Body"].read())
    body[len(body) // 2] ^= 0xFF
    client.put_object(Bucket=bucket, Key=flipped, Body=bytes(body))
    foreign = f"landing/site={SITE}/orders/0/{10**6:020d}-{10**6 + 9:020d}.manifest.json"
    client.put_object(Bucket=bucket, Key=foreign, Body=b"<html>not a manifest</html>")
    truncated = landed[7]  # found while planning: its size differs from its manifest's
    client.put_object(Bucket=bucket, Key=truncated, Body=b"\0" * 10)
    damaged_rows = set()
    for key in (flipped, truncated):
        m = Manifest.from_json(
            client.get_object(Bucket=bucket, Key=key[: -len(".log")] + ".manifest.json")["Body"].read()
        )
        damaged_rows |= {(m.topic, m.partition, o) for o in range(m.base_offset, m.last_offset + 1)}

    # Found while planning: named, nothing committed (not even read by Spark).
    with pytest.raises(DamagedLanding) as planned:
        run_ingest(spark, uri, output)
    assert f"s3://{bucket}/{foreign}: not a kafkad manifest" in str(planned.value)
    assert f"s3://{bucket}/{truncated[: -len('.log')]}.manifest.json: its data object" in str(planned.value)
    assert read_ledger(output) == {} and not list(output.rglob("*.parquet"))

    # --quarantine: those two moved aside; then an executor finds the flipped byte: named, moved, nothing committed.
    quarantine = f"s3://{bucket}/quarantine"
    with pytest.raises(DamagedLanding) as read:
        run_ingest(spark, uri, output, quarantine=quarantine)
    assert f"s3://{bucket}/{flipped}: fails its CRC-32C" in str(read.value)
    assert read_ledger(output) == {} and not list(output.rglob("*.parquet"))
    moved = {k for k in objects(s3, bucket) if k.startswith("quarantine/")}
    assert moved == {
        f"quarantine/{k[len('landing/') :]}"
        for k in (
            foreign,
            truncated,
            truncated[: -len(".log")] + ".manifest.json",
            flipped,
            flipped[: -len(".log")] + ".manifest.json",
        )
    }

    # The next run completes with every other record, once.
    run_ingest(spark, uri, output)
    assert parquet_rows(output) == [r for r in expected if (r[1], r[2], r[3]) not in damaged_rows]
    assert run_ingest(spark, uri, output).topics == ()


@pytest.fixture
def aws_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials and region in the shared files only (what a Spark worker host usually has)."""
    creds, config = tmp_path / "aws-credentials", tmp_path / "aws-config"
    creds.write_text(
        "[default]\naws_access_key_id = kafkad-file\naws_secret_access_key = kafkad-file-secret\n"
    )
    config.write_text("[default]\nregion = us-east-1\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))


@pytest.mark.timeout(1500)  # three JVMs start, then spark-submit (up to 900 s on a loaded machine)
def test_ingest_from_s3_via_spark_submit_on_standalone_cluster(
    tmp_path: Path,
    s3: MotoS3,
    aws_files: None,
    cluster: str,  # noqa: F811
) -> None:
    """Workers read the bucket: endpoint from the driver's --s3-endpoint-url (carried in the plan's
    landing URI), credentials from the shared credentials file in the workers' environment."""
    logs, output = tmp_path / "logs", tmp_path / "out"
    expected = expected_rows(write_logs(logs))
    bucket = s3.create_bucket()
    uri = f"s3://{bucket}/landing"
    assert len(s3_shipper(logs, uri, S3Options(endpoint_url=s3.endpoint)).run_once()) == 15
    env = spark_env()
    env["SPARK_HOME"] = str(SPARK_HOME)
    proc = subprocess.run(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            cluster,
            "--conf",
            "spark.executor.memory=512m",
            "--conf",
            "spark.ui.enabled=false",
            str(REPO / "kafkad" / "spark_bridge" / "ingest.py"),
            "--landing",
            uri,
            "--s3-endpoint-url",
            s3.endpoint,
            "--output",
            str(output),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    for i in range(2):
        assert "Asked to launch executor app-" in (tmp_path / f"worker{i}.log").read_text()
    assert parquet_rows(output) == expected
    assert len(read_ledger(output)) == 5
