"""Turns a schema table into flat per-version decode/encode functions, once, at import.

For one (fields, version, flexible) the compiler keeps only the fields present in that version, so the
decoders and encoders it returns do no version checks per field. Runs of consecutive fixed-width fields
(int8..int64, float64) become one `struct.Struct`, read or written in a single call. Each struct becomes one
straight-line read and one write function generated as source and exec'd (see `_generate`): arrays of
structs (Fetch/Produce partitions) call them per element, so per-field closure calls would dominate. A struct decodes to a
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


# Compiled structs by (fields, flexible, what `version` makes of each field): consecutive versions of an
# API mostly decode the same way, and sharing their functions keeps the idle broker ~2 MB smaller. The
# fields tuple is kept in the value so that its id cannot be reused while the entry lives.
_COMPILED: dict[tuple[int, bool, str], tuple[tuple[Field, ...], StructReader, StructWriter]] = {}


def _shape(fields: tuple[Field, ...], version: int, flexible: bool) -> str:
    """All that compile_struct reads from `version`, as a short string: per field one digit (present 1,
    tagged 2, nullable 4), then its nested fields' shape in parentheses."""
    return "".join(
        str(int(f.present(version)) + 2 * (flexible and f.is_tagged(version)) + 4 * f.is_nullable(version))
        + (f"({_shape(f.fields, version, flexible)})" if f.fields else "")
        for f in fields
    )


def compile_struct(
    fields: tuple[Field, ...], version: int, flexible: bool
) -> tuple[StructReader, StructWriter]:
    """Flat reader and writer for one struct at `version`: see _generate. Versions that read and write
    the same bytes share one pair."""
    key = (id(fields), flexible, _shape(fields, version, flexible))
    hit = _COMPILED.get(key)
    if hit is None:
        hit = _COMPILED[key] = (fields, *_compile_struct(fields, version, flexible))
    return hit[1], hit[2]


def _compile_struct(
    fields: tuple[Field, ...], version: int, flexible: bool
) -> tuple[StructReader, StructWriter]:
    plan: list[tuple[str, Any]] = []  # ("run", [fields]) | ("one", (field, reader, writer))
    absent_const: dict[str, Any] = {}
    absent_fresh: list[Field] = []
    tag_readers: dict[int, tuple[str, p.Reader]] = {}
    tag_writers: list[tuple[int, str, Any, p.Writer]] = []
    run: list[Field] = []

    def flush_run() -> None:
        if run:
            plan.append(("run", list(run)))
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
        # A nullable array's null (aborted_transactions of every Fetch partition) is written inline.
        null = None
        if f.type.startswith("[]") and f.is_nullable(version):
            null = b"\x00" if flexible else p.I32.pack(-1)
        plan.append(("one", (f, rd, wr, null)))
    flush_run()
    tag_writers.sort(key=lambda t: t[0])
    return _generate(plan, absent_const, tuple(absent_fresh), tag_readers, tag_writers, flexible)


_WRITE_ERRORS = (ValueError, TypeError, AttributeError, struct.error)


def _generate(
    plan: list[tuple[str, Any]],
    absent_const: dict[str, Any],
    absent_fresh: tuple[Field, ...],
    tag_readers: dict[int, tuple[str, p.Reader]],
    tag_writers: list[tuple[int, str, Any, p.Writer]],
    flexible: bool,
) -> tuple[StructReader, StructWriter]:
    """Source for one straight-line read and write function per struct, compiled with exec.

    Arrays of structs call these once per element, so the per-field closure calls, zip()s and
    map()s of a step-list interpreter dominated encoding (a 100-partition Fetch response took
    ~500 us); straight-line code with the field names as constants does the same work in one frame.
    Behaviour is the step interpreter's: fixed-width runs are one struct call, a non-fixed field's
    write errors become ValueError naming the field, absent fields get their defaults after the
    present ones, tagged fields last.
    """
    ns: dict[str, Any] = {
        "_absent": absent_const,
        "_fresh": absent_fresh,
        "_tag_readers": tag_readers,
        "_tag_writers": tag_writers,
        "_read_tags": read_tags,
        "_write_tags": write_tags,
        "_ERRORS": _WRITE_ERRORS,
    }
    rsrc = ["def read(buf, pos):"]
    wsrc = ["def write(out, d):", "    get = d.get"]
    items: list[str] = []  # "'name': vN" entries of the decoded dict, in field order
    var = 0
    for i, (kind, what) in enumerate(plan):
        if kind == "run":
            s = struct.Struct(">" + "".join(_FIXED_FMT[f.type] for f in what))
            ns[f"_unpack{i}"], ns[f"_pack{i}"] = s.unpack_from, s.pack
            names = []
            gets = []
            for f in what:
                ns[f"_d{var}"] = f.default_value()
                names.append(f"v{var}")
                items.append(f"{f.name!r}: v{var}")
                gets.append(f"get({f.name!r}, _d{var})")
                var += 1
            rsrc.append(f"    {', '.join(names)}, = _unpack{i}(buf, pos)")
            rsrc.append(f"    pos += {s.size}")
            wsrc.append(f"    out += _pack{i}({', '.join(gets)})")
        else:
            f, rd, wr, null = what
            ns[f"_rd{i}"], ns[f"_wr{i}"], ns[f"_d{var}"] = rd, wr, f.default_value()
            ns[f"_msg{i}"], ns[f"_null{i}"] = f"field {f.name!r}: ", null
            rsrc.append(f"    v{var}, pos = _rd{i}(buf, pos)")
            items.append(f"{f.name!r}: v{var}")
            pad = "    "
            if null is not None:
                wsrc.append(f"    v = get({f.name!r}, _d{var})")
                wsrc.append("    if v is None:")
                wsrc.append(f"        out += _null{i}")
                wsrc.append("    else:")
                pad = "        "
            value = "v" if null is not None else f"get({f.name!r}, _d{var})"
            wsrc.append(f"{pad}try:")
            wsrc.append(f"{pad}    _wr{i}(out, {value})")
            wsrc.append(f"{pad}except _ERRORS as e:")
            wsrc.append(f"{pad}    raise ValueError(_msg{i} + str(e)) from e")
            var += 1
    rsrc.append(f"    d = {{{', '.join(items)}}}")
    if absent_const:
        rsrc.append("    d.update(_absent)")
    if absent_fresh:
        rsrc.append("    for f in _fresh:")
        rsrc.append("        d[f.name] = f.default_value()")
    if flexible:
        # An empty tag section (one 0 byte) is the usual case: skipped without the general call.
        rsrc.append("    if buf[pos] == 0:")
        rsrc.append("        pos += 1")
        rsrc.append("    else:")
        rsrc.append("        pos = _read_tags(buf, pos, d, _tag_readers)")
        # Almost always no tagged field is set (handlers leave them out) and no unknown tags came in:
        # one empty tag section, found by `in` tests (no calls) instead of the general path's loop.
        names = [UNKNOWN_TAGS, *(name for _t, name, _d, _w in tag_writers)]
        wsrc.append(f"    if {' and '.join(f'{n!r} not in d' for n in names)}:")
        wsrc.append("        out.append(0)")
        wsrc.append("    else:")
        wsrc.append("        _write_tags(out, d, _tag_writers)")
    rsrc.append("    return d, pos")
    if len(wsrc) == 2:
        wsrc.append("    pass")
    exec("\n".join(rsrc) + "\n\n" + "\n".join(wsrc), ns)  # source built above from the schema
    return ns["read"], ns["write"]


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
