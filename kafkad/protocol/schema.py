"""The schema table vocabulary: one `Api` per Kafka API, its request and response as `Field` tuples.

The tables (apis_*.py) are generated from Apache Kafka 3.9's clients/src/main/resources/common/message/*.json
by scripts/gen_protocol_schema.py. A field's `versions`/`nullable`/`tagged` are Kafka version-range strings
("3+", "0-4", "2").
Field types: int8/int16/int32/int64/uint16/float64/bool/string/bytes/records/uuid, "[]int32"-style arrays of
primitives, "[]" (array of the nested `fields`) and "struct" (a single nested struct).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_VERSION = 32767

_UNSET: Any = object()


def parse_range(spec: str | None) -> tuple[int, int] | None:
    """Kafka's version-range syntax: "3+", "0-4", "2", or "none"/None for no versions."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    lo, sep, hi = spec.partition("-")
    return (int(lo), int(hi)) if sep else (int(lo), int(lo))


def in_range(spec: str | None, version: int) -> bool:
    r = parse_range(spec)
    return r is not None and r[0] <= version <= r[1]


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str
    versions: str
    nullable: str | None = None
    default: Any = _UNSET
    tag: int | None = None
    tagged: str | None = None
    fields: tuple[Field, ...] = ()

    def present(self, version: int) -> bool:
        return in_range(self.versions, version)

    def is_nullable(self, version: int) -> bool:
        return in_range(self.nullable, version)

    def is_tagged(self, version: int) -> bool:
        return self.tag is not None and in_range(self.tagged, version)

    def default_value(self) -> Any:
        """A fresh default: Kafka's generator rules (0, "", false, empty array, null where declared)."""
        if self.default is not _UNSET:
            return self.default
        t = self.type
        if t.startswith("[]"):
            return []
        if t == "struct":
            return {f.name: f.default_value() for f in self.fields}
        if t == "bool":
            return False
        if t == "string":
            return ""
        if t == "bytes":
            return b""
        if t == "records":
            return None
        if t == "uuid":
            from uuid import UUID

            return UUID(int=0)
        if t == "float64":
            return 0.0
        return 0


def F(
    name: str,
    type_: str,
    versions: str,
    *,
    nullable: str | None = None,
    default: Any = _UNSET,
    tag: int | None = None,
    tagged: str | None = None,
    fields: tuple[Field, ...] = (),
) -> Field:
    return Field(name, type_, versions, nullable, default, tag, tagged, fields)


@dataclass(frozen=True, slots=True)
class Api:
    """One API's schema: key, name, supported (min, max) versions, flexible versions, both bodies."""

    key: int
    name: str
    versions: tuple[int, int]
    flexible: str
    request: tuple[Field, ...]
    response: tuple[Field, ...]

    @property
    def min_version(self) -> int:
        return self.versions[0]

    @property
    def max_version(self) -> int:
        return self.versions[1]

    @property
    def flexible_versions(self) -> str:
        return self.flexible

    def supports(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def is_flexible(self, version: int) -> bool:
        return in_range(self.flexible, version)


ApiSchema = Api
