"""A real kafkad shipping to S3 (moto's server on 127.0.0.1), configured as a new user would.

`bridge.landing.dir=s3://<bucket>/landing`, the standard AWS environment for credentials and region,
the endpoint as `bridge.s3.endpoint.url`. The bucket does not exist at first: the shipper says the
bucket is missing and backs off; once it is created (no object under the prefix: a bucket is all it
needs), every segment lands byte-identical with its manifest and no temp object is left behind.
"""

from __future__ import annotations

import json
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from kafkad.storage.meta_properties import parse_properties
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import create_topics
from tests.integration.test_bridge_daemon import produce, segment_logs, wait_for
from tests.spark.s3_server import STATIC_ENV, MotoS3, moto_s3

pytestmark = pytest.mark.integration
SEGMENT_BYTES = 262_144
RECORDS = 12_000


def landed(client: Any, bucket: str) -> dict[str, bytes]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            if o["Key"].endswith("/"):
                continue  # pyarrow's directory markers (it writes one when a delete empties a "directory")
            try:
                out[o["Key"]] = client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            except client.exceptions.NoSuchKey:
                continue  # deleted since the listing (the shipper's one write probe)
    return out


def covered(client: Any, bucket: str, topic: str, partition: int, end: int) -> bool:
    prefix = f"landing/site=plant-7/{topic}/{partition}/"
    ms = sorted(
        (
            json.loads(v)
            for k, v in landed(client, bucket).items()
            if k.startswith(prefix) and k.endswith(".json")
        ),
        key=lambda m: int(m["base_offset"]),
    )
    expect = 0
    for m in ms:
        if m["base_offset"] != expect:
            return False
        expect = int(m["last_offset"]) + 1
    return expect == end


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Any:
    for k, v in STATIC_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with moto_s3() as server:
        yield server


def test_kafkad_ships_to_an_s3_bucket_created_after_start(tmp_path: Path, s3: MotoS3) -> None:
    bucket = f"bars-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(
        tmp_path / "kafkad",
        {
            "bridge.enabled": "true",
            "bridge.landing.dir": f"s3://{bucket}/landing",
            "bridge.s3.endpoint.url": s3.endpoint,
            "bridge.site": "plant-7",
            "bridge.max.segment.age.ms": "1000",
            "log.segment.bytes": str(SEGMENT_BYTES),
        },
    )
    client: Any = s3.client()
    with broker:
        create_topics(broker.bootstrap, {"ship": 2})
        produce(broker.bootstrap, "ship", 2, RECORDS)
        wait_for(
            "the shipper to report the bucket missing",
            lambda: f"bucket {bucket}" in broker.log_text(),
            broker,
        )
        client.create_bucket(Bucket=bucket)
        for p in (0, 1):
            wait_for(f"ship-{p} landed", partial(covered, client, bucket, "ship", p, RECORDS // 2), broker)
        objects = landed(client, bucket)
        assert not [k for k in objects if k.rsplit("/", 1)[-1].startswith(".")], sorted(objects)
        logs = {k: v for k, v in objects.items() if k.endswith(".log")}
        assert len(logs) >= 4
        for key, data in logs.items():
            _, _, topic, part, name = key.split("/")
            segment = tmp_path / "kafkad" / "data" / f"{topic}-{part}" / f"{name[:20]}.log"
            assert segment_logs(segment.parent)[-1] != segment  # a closed segment
            assert data == segment.read_bytes(), key
        assert set(objects) == set(logs) | {k[: -len(".log")] + ".manifest.json" for k in logs} | {
            "landing/site=plant-7/_cluster_id"
        }
        cluster_id = parse_properties((broker.data_dir / "meta.properties").read_text())["cluster.id"]
        assert objects["landing/site=plant-7/_cluster_id"].decode() == cluster_id
        text = broker.log_text()
        assert " ERROR " not in text and "Traceback" not in text, text[-3000:]
