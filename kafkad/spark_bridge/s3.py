"""S3 landing areas: which endpoint, region and credentials a `s3://bucket/prefix` landing uses.

The standard AWS chain applies, with kafkad settings (`bridge.s3.*`, or the ingest's `--s3-*` flags)
overriding it:

* endpoint: the setting, else the URI's `endpoint_override` (+ `scheme`) query, else
  `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`, else AWS itself;
* region: the setting, else the URI's `region` query, else `AWS_REGION` / `AWS_DEFAULT_REGION`, else
  the SDK's (the shared config file's profile);
* credentials: the settings when both are given, else the SDK's chain (`AWS_ACCESS_KEY_ID` /
  `AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE` in the shared credentials file, instance roles).

`canonical_uri` writes the resolved endpoint and region into the URI's query (never the
credentials): the ingest hands that URI to Spark executors, which thus reach the same endpoint and
region and take credentials from their own chain. pyarrow's `S3FileSystem` does not read
`AWS_ENDPOINT_URL` itself when built directly, hence the explicit resolution here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

_ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
_REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 60.0  # a stalled request fails (the shipper backs off) rather than hangs


@dataclass(frozen=True, slots=True)
class S3Options:
    """Overrides of the AWS chain (None: the chain decides)."""

    endpoint_url: str | None = None  # http(s)://host:port
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None

    def __repr__(self) -> str:  # never log the secret
        return f"S3Options(endpoint_url={self.endpoint_url!r}, region={self.region!r})"


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def split_endpoint(url: str) -> tuple[str, str]:
    """`http://host:port` -> ("http", "host:port"); a bare `host:port` is https."""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"S3 endpoint {url!r}: expected http(s)://host[:port]")
    return parts.scheme, parts.netloc


def _first_env(environ: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((environ[n] for n in names if environ.get(n)), None)


def canonical_uri(
    uri: str, options: S3Options | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """`s3://bucket/prefix?endpoint_override=host:port&scheme=http&region=r`, resolved as above."""
    env = os.environ if environ is None else environ
    opts = options or S3Options()
    parts = urlsplit(uri)
    query = dict(parse_qsl(parts.query))
    if opts.endpoint_url:
        query["scheme"], query["endpoint_override"] = split_endpoint(opts.endpoint_url)
    elif "endpoint_override" not in query and (url := _first_env(env, _ENDPOINT_ENV)):
        query["scheme"], query["endpoint_override"] = split_endpoint(url)
    region = opts.region or query.get("region") or _first_env(env, _REGION_ENV)
    if region:
        query["region"] = region
    path = f"{parts.netloc}{parts.path}".rstrip("/")
    return f"s3://{path}" + (f"?{urlencode(sorted(query.items()), safe=':/')}" if query else "")


def bucket_and_root(uri: str) -> tuple[str, str]:
    """("bucket", "bucket/prefix") of an s3 URI."""
    parts = urlsplit(uri)
    if not parts.netloc:
        raise ValueError(f"{uri}: no bucket")
    return parts.netloc, f"{parts.netloc}{parts.path}".rstrip("/")


def filesystem(uri: str, options: S3Options | None = None) -> Any:
    """A `pyarrow.fs.S3FileSystem` for a canonical URI (credentials from `options` or the chain)."""
    from pyarrow import fs as pafs

    query = dict(parse_qsl(urlsplit(uri).query))
    kwargs: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "request_timeout": REQUEST_TIMEOUT_S,
        # Object stores have no directories: never write empty "dir/" marker objects.
        "check_directory_existence_before_creation": True,
    }
    if "endpoint_override" in query:
        kwargs["endpoint_override"] = query["endpoint_override"]
        kwargs["scheme"] = query.get("scheme", "https")
    if "region" in query:
        kwargs["region"] = query["region"]
    elif "endpoint_override" in query:
        kwargs["region"] = "us-east-1"  # a private endpoint: no lookup of the bucket's AWS region
    if options is not None and options.access_key_id and options.secret_access_key:
        kwargs["access_key"] = options.access_key_id
        kwargs["secret_key"] = options.secret_access_key
    return pafs.S3FileSystem(**kwargs)
