"""S3 landing options: the AWS environment, the URI and kafkad's settings, in that order of precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.config.broker_config import ConfigError, load_config
from kafkad.spark_bridge.landing import FilesystemLanding, PyArrowLanding, open_landing
from kafkad.spark_bridge.s3 import S3Options, canonical_uri, split_endpoint

ENV = {"AWS_ENDPOINT_URL": "http://env-host:9000", "AWS_REGION": "eu-west-1"}


def test_the_environment_then_the_uri_then_the_settings() -> None:
    assert canonical_uri("s3://b/p/", environ={}) == "s3://b/p"
    assert canonical_uri("s3://b/p", environ=ENV) == (
        "s3://b/p?endpoint_override=env-host:9000&region=eu-west-1&scheme=http"
    )
    env_s3 = {**ENV, "AWS_ENDPOINT_URL_S3": "https://s3-only:443"}
    assert "endpoint_override=s3-only:443&region=eu-west-1&scheme=https" in canonical_uri(
        "s3://b", environ=env_s3
    )
    in_uri = "s3://b/p?endpoint_override=uri-host:1&scheme=http&region=r1"
    assert canonical_uri(in_uri, environ=ENV) == "s3://b/p?endpoint_override=uri-host:1&region=r1&scheme=http"
    settings = S3Options(endpoint_url="https://set:8443", region="ap-south-1")
    assert canonical_uri(in_uri, settings, environ=ENV) == (
        "s3://b/p?endpoint_override=set:8443&region=ap-south-1&scheme=https"
    )
    secret = S3Options(access_key_id="AK", secret_access_key="SECRET")
    assert "SECRET" not in canonical_uri("s3://b", secret, environ=ENV) and "SECRET" not in repr(secret)


def test_endpoints_and_stores() -> None:
    assert split_endpoint("http://h:1") == ("http", "h:1") and split_endpoint("h:2") == ("https", "h:2")
    with pytest.raises(ValueError, match="expected http"):
        split_endpoint("ftp://h")
    assert isinstance(open_landing("/x"), FilesystemLanding)
    store = open_landing("s3://b/p", S3Options(endpoint_url="http://h:1"))
    assert isinstance(store, PyArrowLanding) and store.uri.startswith("s3://b/p?endpoint_override=h:1")


def test_bridge_s3_settings_are_checked(tmp_path: Path) -> None:
    base = ["broker.id=0", f"log.dirs={tmp_path}", "bridge.enabled=true", "bridge.landing.dir=s3://b/p"]
    cfg = load_config(None, [*base, "bridge.s3.endpoint.url=http://h:9000", "bridge.s3.region=r"])
    assert cfg.bridge.s3 == S3Options("http://h:9000", "r")
    with pytest.raises(ConfigError, match=r"bridge\.s3\.endpoint\.url: S3 endpoint 'ftp://h'"):
        load_config(None, [*base, "bridge.s3.endpoint.url=ftp://h"])
    with pytest.raises(
        ConfigError, match=r"bridge\.s3\.access\.key\.id: set with bridge\.s3\.secret\.access\.key"
    ):
        load_config(None, [*base, "bridge.s3.access.key.id=AK"])
    both = load_config(None, [*base, "bridge.s3.access.key.id=AK", "bridge.s3.secret.access.key=SK"])
    assert (both.bridge.s3.access_key_id, both.bridge.s3.secret_access_key) == ("AK", "SK")
