"""Turns a schema table into flat per-version decode/encode functions, once, at import.

For one (fields, version, flexible) the compiler keeps only the fields present in that version, so the
decoders and encoders it returns do no version checks per field. Runs of consecutive fixed-width fields
(int8..int64, float64) become one `struct.Struct`, read or written in a single call. A struct decodes to a
dict holding every field the table knows (absent ones get their defaults); tagged fields the table does not
know are kept as raw bytes under UNKNOWN_TAGS so a re-encode gives back the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from kafkad.protocol import primitives as p
from kafkad.protocol.errors import ProtocolDecodeError
from kafkad.protocol.schema import Field

UNKNOWN_TAGS = "_unknown_tagged_fields"

StructReader = Callable[[p.Buf, int], tuple[dict[str, Any], int]]
StructWriter = Callable[[p.Out, Mapping[str, Any]], None]
_Step = Callable[[p.Buf, int, dict[str, Any]], int]
_WStep = Callable[[p.Out, Mapping[str, Any]], None]

_FIXED_FMT = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I"}
_FIXED_FMT["float64"] = "d"


def _is_mutable_default(f: Field) -> bool:
    return f.type.startswith("[]") or f.type == "struct"


def field_codec(f: Field, version: int, flexible: bool) -> tuple[p.Reader, p.Writer]:
    """Reader and writer for one field's value at `version` (arrays and structs compiled recursively)."""
    nullable = f.is_nullable(version)
    t = f.type
    if t == "[]" or t == "struct":
        rd, wr = compile_struct(f.fields, version, flexible)
        if t == "struct":
            return rd, wr
        return p.array_reader(rd, flexible, nullable), p.array_writer(wr, flexible, nullable)
    if t.startswith("[]"):
        ird, iwr = p.primitive_codec(t[2:], flexible, False)
        return p.array_reader(ird, flexible, nullable), p.array_writer(iwr, flexible, nullable)
    return p.primitive_codec(t, flexible, nullable)


def _fixed_run(run: list[Field]) -> tuple[_Step, _WStep]:
    s = struct.Struct(">" + "".join(_FIXED_FMT[f.type] for f in run))
    names = tuple(f.name for f in run)
    defaults = tuple(f.default_value() for f in run)
    unpack_from, pack, size = s.unpack_from, s.pack, s.size

    def step(buf: p.Buf, pos: int, d: dict[str, Any]) -> int:
        d.update(zip(names, unpack_from(buf, pos), strict=True))
        return pos + size

    def wstep(out: p.Out, d: Mapping[str, Any]) -> None:
        out += pack(*map(d.get, names, defaults))

    return step, wstep


def _single(f: Field, rd: p.Reader, wr: p.Writer) -> tuple[_Step, _WStep]:
    name, dflt = f.name, f.default_value()

    def step(buf: p.Buf, pos: int, d: dict[str, Any]) -> int:
        d[name], pos = rd(buf, pos)
        return pos

    def wstep(out: p.Out, d: Mapping[str, Any]) -> None:
        try:
            wr(out, d.get(name, dflt))
        except (ValueError, TypeError, AttributeError, struct.error) as e:
            raise ValueError(f"field {name!r}: {e}") from e

    return step, wstep


def compile_struct(
    fields: tuple[Field, ...], version: int, flexible: bool
) -> tuple[StructReader, StructWriter]:
    steps: list[_Step] = []
    wsteps: list[_WStep] = []
    absent_const: dict[str, Any] = {}
    absent_fresh: list[Field] = []
    tag_readers: dict[int, tuple[str, p.Reader]] = {}
    tag_writers: list[tuple[int, str, Any, p.Writer]] = []
    run: list[Field] = []

    def flush_run() -> None:
        if run:
            s, w = _fixed_run(run)
            steps.append(s)
            wsteps.append(w)
            run.clear()

    for f in fields:
        tagged = flexible and f.is_tagged(version)
        if not f.present(version) or tagged:
            # Absent (or tagged, hence optional): the decoder starts from the default.
            if _is_mutable_default(f):
                absent_fresh.append(f)
            else:
                absent_const[f.name] = f.default_value()
            if tagged:
                rd, wr = field_codec(f, version, flexible)
                assert f.tag is not None
                tag_readers[f.tag] = (f.name, rd)
                tag_writers.append((f.tag, f.name, f.default_value(), wr))
            continue
        if f.type in _FIXED_FMT:
            run.append(f)
            continue
        flush_run()
        rd, wr = field_codec(f, version, flexible)
        s, w = _single(f, rd, wr)
        steps.append(s)
        wsteps.append(w)
    flush_run()
    tag_writers.sort(key=lambda t: t[0])
    steps_t, wsteps_t, fresh_t = tuple(steps), tuple(wsteps), tuple(absent_fresh)
    has_absent = bool(absent_const or fresh_t)

    def read(buf: p.Buf, pos: int) -> tuple[dict[str, Any], int]:
        d: dict[str, Any] = {}
        for step in steps_t:
            pos = step(buf, pos, d)
        if has_absent:
            d.update(absent_const)
            for f in fresh_t:
                d[f.name] = f.default_value()
        if flexible:
            pos = read_tags(buf, pos, d, tag_readers)
        return d, pos

    def write(out: p.Out, d: Mapping[str, Any]) -> None:
        for w in wsteps_t:
            w(out, d)
        if flexible:
            write_tags(out, d, tag_writers)

    return read, write


def read_tags(buf: p.Buf, pos: int, d: dict[str, Any], known: Mapping[int, tuple[str, p.Reader]]) -> int:
    count, pos = p.read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise ProtocolDecodeError(f"{count} tagged fields cannot fit in the frame")
    unknown: dict[int, bytes] | None = None
    for _ in range(count):
        tag, pos = p.read_uvarint(buf, pos)
        size, pos = p.read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise ProtocolDecodeError("truncated tagged field")
        entry = known.get(tag)
        if entry is None:
            if unknown is None:
                unknown = {}
            unknown[tag] = bytes(buf[pos:end])
        else:
            d[entry[0]], _ = entry[1](buf[:end], pos)
        pos = end
    if unknown is not None:
        d[UNKNOWN_TAGS] = unknown
    return pos


def write_tags(out: p.Out, d: Mapping[str, Any], known: list[tuple[int, str, Any, p.Writer]]) -> None:
    unknown: Mapping[int, bytes] = d.get(UNKNOWN_TAGS) or {}
    items: list[tuple[int, bytes]] = []
    for tag, name, dflt, wr in known:
        v = d.get(name, dflt)
        if v != dflt:
            tmp = p.Out()
            wr(tmp, v)
            items.append((tag, bytes(tmp)))
    if unknown:
        items.extend(unknown.items())
        items.sort(key=lambda t: t[0])
    p.write_uvarint(out, len(items))
    for tag, data in items:
        p.write_uvarint(out, tag)
        p.write_uvarint(out, len(data))
        out += data
