"""Kafka's primitive wire types: readers over a memoryview and writers into an `Out` buffer.

A reader is `read(buf, pos) -> (value, new_pos)`; a writer is `write(out, value) -> None`. Readers raise
ProtocolDecodeError on truncation or bad lengths; the few spots where Python itself would notice first
(struct.error, IndexError on a varint byte) are turned into ProtocolDecodeError by the codec's entry points.
`Out` is a bytearray that can also hold out-of-band chunks (RecordsRef objects the daemon sendfiles).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any
from uuid import UUID

from kafkad.protocol.errors import ProtocolDecodeError

Buf = memoryview
Reader = Callable[[Buf, int], tuple[Any, int]]

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
F64 = struct.Struct(">d")

FIXED: dict[str, struct.Struct] = {
    "int8": I8,
    "int16": I16,
    "int32": I32,
    "int64": I64,
    "uint16": U16,
    "uint32": U32,
    "float64": F64,
}


class Out(bytearray):
    """The encode buffer. `add_ref` ends the current bytes run and records an out-of-band chunk."""

    # No __init__ and no __slots__: `chunks` starts as the class default, an empty tuple (so nothing can
    # append to a shared list), and becomes the instance's own list on the first add_ref. A Python
    # __init__ made Out() ~6x the cost of bytearray(), paid once per response.
    chunks: list[Any] = ()  # type: ignore[assignment]

    def add_ref(self, ref: Any) -> None:
        # The first run keeps its reserved size prefix as a bytearray so it can be patched at the end.
        chunks = self.chunks
        if not chunks:
            self.chunks = [bytearray(self), ref]
        else:
            if self:
                chunks.append(bytes(self))
            chunks.append(ref)
        del self[:]


Writer = Callable[[Out, Any], None]


# --- varints ---------------------------------------------------------------------------------------


def read_uvarint(buf: Buf, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 63:
            raise ProtocolDecodeError("varint too long")


def write_uvarint(out: bytearray, value: int) -> None:
    # One and two bytes first: compact lengths and tagged-field counts of every flexible struct.
    if value < 0x80:
        if value < 0:
            raise ValueError(f"unsigned varint cannot hold {value}")
        out.append(value)
        return
    if value < 0x4000:
        out.append((value & 0x7F) | 0x80)
        out.append(value >> 7)
        return
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(buf: Buf, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint/varlong (protobuf style), as in record batches."""
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def write_varint(out: bytearray, value: int) -> None:
    write_uvarint(out, (value << 1) ^ (value >> 63))


read_varlong = read_varint
write_varlong = write_varint


# --- helpers ---------------------------------------------------------------------------------------


def _end(buf: Buf, pos: int, n: int) -> int:
    end = pos + n
    if end > len(buf):
        raise ProtocolDecodeError(f"truncated: need {n} bytes at {pos}, frame has {len(buf)}")
    return end


def fixed_reader(s: struct.Struct) -> Reader:
    unpack_from, size = s.unpack_from, s.size

    def read(buf: Buf, pos: int) -> tuple[Any, int]:
        return unpack_from(buf, pos)[0], pos + size

    return read


def fixed_writer(s: struct.Struct) -> Writer:
    pack = s.pack

    def write(out: Out, v: Any) -> None:
        out += pack(v)

    return write


def read_bool(buf: Buf, pos: int) -> tuple[bool, int]:
    return buf[pos] != 0, pos + 1


def write_bool(out: Out, v: Any) -> None:
    out.append(1 if v else 0)


def read_uuid(buf: Buf, pos: int) -> tuple[UUID, int]:
    end = _end(buf, pos, 16)
    return UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(out: Out, v: Any) -> None:
    out += v.bytes


# --- lengths: classic (int16/int32, -1 = null) or compact (uvarint N+1, 0 = null) ---------------------


def _len16(buf: Buf, pos: int) -> tuple[int, int]:
    return I16.unpack_from(buf, pos)[0], pos + 2


def _len32(buf: Buf, pos: int) -> tuple[int, int]:
    return I32.unpack_from(buf, pos)[0], pos + 4


def _len_compact(buf: Buf, pos: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def _wlen16(out: Out, n: int) -> None:
    out += I16.pack(n)


def _wlen32(out: Out, n: int) -> None:
    out += I32.pack(n)


def _wlen_compact(out: Out, n: int) -> None:
    write_uvarint(out, n + 1)


LenReader = Callable[[Buf, int], tuple[int, int]]
LenWriter = Callable[[Out, int], None]


def length_codec(kind: str, compact: bool) -> tuple[LenReader, LenWriter]:
    """kind "string" uses int16 lengths, "bytes"/"array" int32; compact ones an unsigned varint."""
    if compact:
        return _len_compact, _wlen_compact
    return (_len16, _wlen16) if kind == "string" else (_len32, _wlen32)


def string_reader(compact: bool, nullable: bool) -> Reader:
    # Length read and bounds check inlined: strings are most of a small request's fields (client_id,
    # group_id, member_id, topic names), and two helper calls per string showed in the profiles.
    if compact:

        def read_compact(buf: Buf, pos: int) -> tuple[str | None, int]:
            b = buf[pos]
            if b < 0x80:
                n = b - 1
                pos += 1
            else:
                n, pos = read_uvarint(buf, pos)
                n -= 1
            if n < 0:
                if nullable and n == -1:
                    return None, pos
                raise ProtocolDecodeError(f"bad string length {n}")
            end = pos + n
            if end > len(buf):
                raise ProtocolDecodeError(f"truncated: need {n} bytes at {pos}, frame has {len(buf)}")
            return str(buf[pos:end], "utf-8"), end

        return read_compact
    unpack16 = I16.unpack_from

    def read(buf: Buf, pos: int) -> tuple[str | None, int]:
        n = unpack16(buf, pos)[0]
        pos += 2
        if n < 0:
            if nullable and n == -1:
                return None, pos
            raise ProtocolDecodeError(f"bad string length {n}")
        end = pos + n
        if end > len(buf):
            raise ProtocolDecodeError(f"truncated: need {n} bytes at {pos}, frame has {len(buf)}")
        return str(buf[pos:end], "utf-8"), end

    return read


def string_writer(compact: bool, nullable: bool) -> Writer:
    if compact:

        def write_compact(out: Out, v: Any) -> None:
            if v is None:
                if not nullable:
                    raise ValueError("null for a non-nullable string")
                out.append(0)
                return
            data = v.encode()
            n = len(data) + 1
            if n < 0x80:
                out.append(n)
            else:
                write_uvarint(out, n)
            out += data

        return write_compact
    pack16 = I16.pack

    def write(out: Out, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ValueError("null for a non-nullable string")
            out += b"\xff\xff"
            return
        data = v.encode()
        out += pack16(len(data))
        out += data

    return write


def bytes_reader(compact: bool, nullable: bool, view: bool) -> Reader:
    """`view`: return a memoryview slice of the frame (records) instead of a bytes copy."""
    unpack32 = I32.unpack_from

    def read(buf: Buf, pos: int) -> tuple[Any, int]:
        if compact:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n = unpack32(buf, pos)[0]
            pos += 4
        if n < 0:
            if nullable and n == -1:
                return None, pos
            raise ProtocolDecodeError(f"bad bytes length {n}")
        end = pos + n
        if end > len(buf):
            raise ProtocolDecodeError(f"truncated: need {n} bytes at {pos}, frame has {len(buf)}")
        return (buf[pos:end] if view else bytes(buf[pos:end])), end

    return read


def bytes_writer(compact: bool, nullable: bool) -> Writer:
    write_len = length_codec("bytes", compact)[1]

    def write(out: Out, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ValueError("null for non-nullable bytes")
            write_len(out, -1)
            return
        write_len(out, memoryview(v).nbytes)
        out += v

    return write


def _chunk_size(v: Any) -> int:
    if isinstance(v, (bytes, bytearray)):
        return len(v)
    if isinstance(v, memoryview):
        return v.nbytes
    return int(v.size)


def records_writer(compact: bool) -> Writer:
    """None, bytes-like, a RecordsRef (anything with `.size`), or a list of those (length = sum)."""
    write_len = length_codec("bytes", compact)[1]
    pack_len = I32.pack
    inline = (bytes, bytearray, memoryview)

    def put(out: Out, v: Any) -> None:
        if isinstance(v, inline):
            out += v
        else:
            out.add_ref(v)

    def write(out: Out, v: Any) -> None:
        # Once per partition of every Fetch response: the common single-chunk cases come first.
        t = type(v)
        if t is bytes or t is bytearray:
            if compact:
                write_uvarint(out, len(v) + 1)
            else:
                out += pack_len(len(v))
            out += v
        elif v is None:
            write_len(out, -1)
        elif t is list:
            write_len(out, sum(_chunk_size(c) for c in v))
            for c in v:
                put(out, c)
        elif isinstance(v, inline):
            write_len(out, _chunk_size(v))
            out += v
        elif isinstance(v, list):
            write_len(out, sum(_chunk_size(c) for c in v))
            for c in v:
                put(out, c)
        else:
            n = int(v.size)
            if compact:
                write_uvarint(out, n + 1)
            else:
                out += pack_len(n)
            out.add_ref(v)

    return write


def array_reader(item: Reader, compact: bool, nullable: bool) -> Reader:
    unpack32 = I32.unpack_from

    def read(buf: Buf, pos: int) -> tuple[list[Any] | None, int]:
        if compact:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n = unpack32(buf, pos)[0]
            pos += 4
        if n < 0:
            if nullable and n == -1:
                return None, pos
            raise ProtocolDecodeError(f"bad array length {n}")
        if n > len(buf) - pos:  # every element takes at least one byte
            raise ProtocolDecodeError(f"array of {n} items cannot fit in the frame")
        if n == 1:  # the usual one topic / one partition of a small request
            v, pos = item(buf, pos)
            return [v], pos
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            v, pos = item(buf, pos)
            append(v)
        return items, pos

    return read


def array_writer(item: Writer, compact: bool, nullable: bool) -> Writer:
    write_len = length_codec("array", compact)[1]
    pack32 = I32.pack

    def write(out: Out, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ValueError("null for a non-nullable array")
            write_len(out, -1)
            return
        n = len(v)
        if not compact:
            out += pack32(n)
        elif n < 0x7F:
            out.append(n + 1)
        else:
            write_uvarint(out, n + 1)
        for x in v:
            item(out, x)

    return write


def primitive_codec(type_: str, compact: bool, nullable: bool) -> tuple[Reader, Writer]:
    """Reader and writer for a scalar field type (not arrays or structs)."""
    if type_ in FIXED:
        s = FIXED[type_]
        return fixed_reader(s), fixed_writer(s)
    if type_ == "bool":
        return read_bool, write_bool
    if type_ == "uuid":
        return read_uuid, write_uuid
    if type_ == "string":
        return string_reader(compact, nullable), string_writer(compact, nullable)
    if type_ == "bytes":
        return bytes_reader(compact, nullable, view=False), bytes_writer(compact, nullable)
    if type_ == "records":
        return bytes_reader(compact, nullable, view=True), records_writer(compact)
    raise ValueError(f"unknown field type {type_!r}")
