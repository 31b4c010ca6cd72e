"""Damaged or foreign objects in the landing area, and moving them aside (`--quarantine PREFIX`).

An object is damaged when its manifest does not parse, names other offsets than its key, or
describes a `.log` that is missing or of another size (all found by the driver while planning, from
one listing), or when the `.log`'s bytes fail the CRC-32C or batch checks (found by an executor while
reading). Either way the run commits nothing: the planning error stops it before Spark runs; an
executor's error fails the Spark job, whose staged files the next run discards. Every message names
the object's full key (`s3://bucket/prefix/site=.../0/<first>-<last>.log`).

Executors cannot return a list to the driver, so their error carries the key between markers
(`damaged object <KEY>`), which `keys_in` finds again in the text of the failed job's exception.

With a quarantine prefix (a location on the same filesystem, outside the landing), the manifest and
the `.log` of each damaged object are moved there under their relative names: damaged objects found
while planning are moved and the run goes on without them; those found by executors are moved after
the failed job, so the next run completes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import NamedTuple

from kafkad.spark_bridge.landing import LandingStore
from kafkad.spark_bridge.manifest import LOG_SUFFIX, MANIFEST_SUFFIX

log = logging.getLogger(__name__)

_MARKER_RE = re.compile(r"damaged object <([^<>\s]+)>")


class Damaged(NamedTuple):
    name: str  # relative to the landing root (a manifest or a .log)
    why: str


class DamagedLanding(Exception):
    """The landing holds objects the ingest cannot take; nothing was committed."""

    def __init__(self, store: LandingStore, damaged: Iterable[Damaged], moved_to: str | None) -> None:
        self.damaged = list(damaged)
        lines = [f"{store.key(d.name)}: {d.why}" for d in self.damaged]
        tail = (
            f"moved aside to {moved_to}; the next run completes"
            if moved_to
            else "nothing was committed; --quarantine PREFIX moves them aside"
        )
        super().__init__(f"{len(lines)} damaged object(s) in the landing ({tail}):\n  " + "\n  ".join(lines))


def marker(key: str) -> str:
    """How an executor names a damaged object in its exception (found again by `keys_in`)."""
    return f"damaged object <{key}>"


def keys_in(text: str) -> list[str]:
    return sorted(set(_MARKER_RE.findall(text)))


def relative(store: LandingStore, key: str) -> str | None:
    root = store.key("").rstrip("/") + "/"
    return key[len(root) :] if key.startswith(root) else None


def pair(name: str) -> tuple[str, str]:
    """(manifest, log) names of the object `name` (either one)."""
    for suffix in (MANIFEST_SUFFIX, LOG_SUFFIX):
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            return stem + MANIFEST_SUFFIX, stem + LOG_SUFFIX
    return name, name


def check_quarantine(store: LandingStore, dest: str) -> None:
    """The prefix must be outside the landing (else its objects would be listed again)."""
    root = store.key("").rstrip("/")
    probe = dest.split("?", 1)[0].rstrip("/")
    if "://" not in probe and "://" in root:
        raise ValueError(
            f"quarantine {dest}: must be a URI like the landing's ({root.split('://')[0]}://...)"
        )
    if "://" not in probe:
        from pathlib import Path

        probe = str(Path(probe.removeprefix("file://")).absolute())
    if probe == root or probe.startswith(root + "/"):
        raise ValueError(f"quarantine {dest}: must be outside the landing {root}")


def move_aside(store: LandingStore, damaged: Iterable[Damaged], dest: str, present: Iterable[str]) -> None:
    """Moves each damaged object's manifest first (readers stop seeing it), then its .log."""
    exists = set(present)
    for d in damaged:
        for name in pair(d.name):
            if name in exists:
                moved = store.move_aside(name, dest)
                exists.discard(name)
                log.warning("quarantined %s -> %s (%s)", store.key(name), moved, d.why)
