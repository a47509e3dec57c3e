"""A minimal, defensive little-endian FlatBuffers reader over bytes or a memory map.

Contract: only what ONNX Runtime's checkpoint schema needs (tables, vtables, scalars, strings,
vectors of tables/strings/scalars), without the `flatbuffers` package. Every offset is
bounds-checked before it is read: anything out of range or malformed raises `CorruptFileError`
naming the file, never IndexError/struct.error/ValueError.
Strings are the only copies, bounded in total by COPY_FACTOR x the buffer (+ COPY_FLOOR), so a
small crafted file cannot copy one long string a million times. Vectors of tables list each table
once, and TABLES_MAX bounds the tables all vectors list together (the work a file can ask for).

Layout: root uoffset at byte 0; a table starts with an int32 soffset to its vtable (uint16 [vtable
size, table size, field offsets...], 0 = absent); strings/vectors are a uint32 count, then elements.
"""

from __future__ import annotations

import struct

from onnxport.core.util.budgets import ENTRIES_MAX
from onnxport.core.util.errors import CorruptFileError

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F32 = struct.Struct("<f")


_VTABLE_ENTRIES: dict[int, struct.Struct] = {}
COPY_FACTOR = 2
COPY_FLOOR = 1 << 20
TABLES_MAX = ENTRIES_MAX  # tables all vectors list together (budgets: ~40 us and ~1.5 KB each)


def _entries(count: int) -> struct.Struct:
    fmt = _VTABLE_ENTRIES.get(count)
    if fmt is None:
        fmt = _VTABLE_ENTRIES[count] = struct.Struct(f"<{count}H")
    return fmt


class FlatBuffer:
    """Bounds-checked access to a little-endian flatbuffer; `label` (the file) names errors."""

    __slots__ = ("data", "size", "label", "copy_left", "tables_left")

    def __init__(self, data, label: str) -> None:
        view = data if isinstance(data, memoryview) else memoryview(data)
        self.data = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        self.size = len(self.data)
        self.label = label
        self.copy_left = COPY_FACTOR * self.size + COPY_FLOOR
        self.tables_left = TABLES_MAX

    def error(self, what: str) -> CorruptFileError:
        return CorruptFileError(f"{self.label}: corrupt or truncated file ({what})")

    def check(self, pos: int, length: int, what: str) -> None:
        """Raise unless bytes [pos, pos + length) lie inside the buffer."""
        if pos < 0 or length < 0 or pos + length > self.size:
            raise self.error(f"{what} at offset {pos} runs past the end ({self.size} bytes)")

    def _read(self, fmt: struct.Struct, pos: int, what: str):
        if 0 <= pos <= self.size - fmt.size:
            return fmt.unpack_from(self.data, pos)[0]
        raise self.error(f"{what} at offset {pos} runs past the end ({self.size} bytes)")

    def u8(self, pos: int, what: str = "byte") -> int:
        return self._read(_U8, pos, what)

    def u16(self, pos: int, what: str = "uint16") -> int:
        return self._read(_U16, pos, what)

    def i32(self, pos: int, what: str = "int32") -> int:
        return self._read(_I32, pos, what)

    def u32(self, pos: int, what: str = "uint32") -> int:
        return self._read(_U32, pos, what)

    def i64(self, pos: int, what: str = "int64") -> int:
        return self._read(_I64, pos, what)

    def f32(self, pos: int, what: str = "float") -> float:
        return self._read(_F32, pos, what)

    def identifier(self) -> bytes:
        """The 4-byte file identifier (bytes 4..8), b"" if the buffer is too short."""
        return bytes(self.data[4:8]) if self.size >= 8 else b""

    def root(self) -> Table:
        return Table(self, self.u32(0, "root offset"))

    def deref(self, pos: int, what: str) -> int:
        """Follow the uoffset stored at `pos`."""
        if 0 <= pos <= self.size - 4:
            return pos + _U32.unpack_from(self.data, pos)[0]
        raise self.error(f"{what} at offset {pos} runs past the end ({self.size} bytes)")

    def vector(self, pos: int, elem_size: int, what: str) -> tuple[int, int]:
        """(first element position, count) of the vector at `pos`, all of it in range."""
        if 0 <= pos <= self.size - 4:
            count = _U32.unpack_from(self.data, pos)[0]
            if pos + 4 + count * elem_size <= self.size:
                return pos + 4, count
        raise self.error(f"{what} at offset {pos} runs past the end ({self.size} bytes)")

    def _copy(self, count: int) -> None:
        self.copy_left -= count
        if self.copy_left < 0:
            raise CorruptFileError(f"{self.label}: its strings are shared by so many fields that they add up to "
                                   f"over {COPY_FACTOR}x the file's size; refused (a crafted file?)")

    def count_tables(self, count: int) -> None:
        """Take `count` entries (tables, strings of string vectors) from the buffer's one budget."""
        self.tables_left -= count
        if self.tables_left < 0:
            raise CorruptFileError(f"{self.label}: lists over {TABLES_MAX:,} tensors, states, properties or strings; "
                                   f"refused (a crafted file?)")

    def string(self, pos: int, what: str = "string") -> str:
        start, count = self.vector(pos, 1, what)
        self._copy(count)
        try:
            return str(self.data[start:start + count], "utf-8")
        except UnicodeDecodeError:
            raise self.error(f"{what} is not UTF-8") from None

    def raw_string(self, pos: int, what: str = "string") -> bytes:
        start, count = self.vector(pos, 1, what)
        self._copy(count)
        return bytes(self.data[start:start + count])


class Table:
    """A table at `pos`; fields are addressed by slot number (0-based, schema order)."""

    __slots__ = ("buf", "pos", "slots")

    def __init__(self, buf: FlatBuffer, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        vtable = pos - buf.i32(pos, "table")
        vsize = buf.u16(vtable, "vtable")
        if vsize < 4 or vsize % 2 or vtable + vsize > buf.size:
            raise buf.error(f"bad vtable (size {vsize}) at offset {vtable}")
        count = (vsize - 4) // 2
        self.slots = _entries(count).unpack_from(buf.data, vtable + 4) if count else ()

    def field(self, slot: int) -> int:
        """Absolute position of the field's inline value, 0 if the field is absent."""
        slots = self.slots
        if slot < len(slots) and slots[slot]:
            return self.pos + slots[slot]
        return 0

    def has(self, slot: int) -> bool:
        return self.field(slot) != 0

    def bool(self, slot: int, default: bool = False) -> bool:
        at = self.field(slot)
        return bool(self.buf.u8(at, "bool field")) if at else default

    def i32(self, slot: int, default: int = 0) -> int:
        at = self.field(slot)
        return self.buf.i32(at, "int32 field") if at else default

    def i64(self, slot: int, default: int = 0) -> int:
        at = self.field(slot)
        return self.buf.i64(at, "int64 field") if at else default

    def f32(self, slot: int, default: float = 0.0) -> float:
        at = self.field(slot)
        return self.buf.f32(at, "float field") if at else default

    def table(self, slot: int) -> Table | None:
        at = self.field(slot)
        return Table(self.buf, self.buf.deref(at, "table offset")) if at else None

    def string(self, slot: int) -> str | None:
        at = self.field(slot)
        return self.buf.string(self.buf.deref(at, "string offset")) if at else None

    def vector(self, slot: int, elem_size: int, what: str = "vector") -> tuple[int, int] | None:
        """(first element position, count) of a vector field, None if absent."""
        at = self.field(slot)
        return self.buf.vector(self.buf.deref(at, "vector offset"), elem_size, what) if at else None

    def tables(self, slot: int) -> list[Table]:
        """The tables of a vector field: each listed once, all vectors together at most TABLES_MAX."""
        vec = self.vector(slot, 4, "table vector")
        if vec is None:
            return []
        start, count = vec
        buf = self.buf
        buf.count_tables(count)
        positions = [buf.deref(start + 4 * i, "table offset") for i in range(count)]
        if len(set(positions)) != count:
            raise buf.error(f"a table vector at offset {start - 4} lists one table more than once")
        return [Table(buf, pos) for pos in positions]

    def raw_strings(self, slot: int) -> list[bytes]:
        vec = self.vector(slot, 4, "string vector")
        if vec is None:
            return []
        start, count = vec
        buf = self.buf
        buf.count_tables(count)  # the same budget: 24M offsets to one empty string cost no copy
        return [buf.raw_string(buf.deref(start + 4 * i, "string offset")) for i in range(count)]

    def int64s(self, slot: int) -> tuple[int, ...]:
        """The values of an int64 vector field (empty if absent)."""
        vec = self.vector(slot, 8, "int64 vector")
        if vec is None or vec[1] == 0:
            return ()
        return struct.unpack_from(f"<{vec[1]}q", self.buf.data, vec[0])

