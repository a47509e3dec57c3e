"""A minimal, defensive FlatBuffers reader over a memory map.

Only what ONNX Runtime's checkpoint schema needs: tables, scalars, strings, vectors of tables,
vectors of scalars as zero-copy numpy views. Every offset is bounds-checked; anything malformed
raises `CorruptFileError` naming the file, never IndexError/struct.error.
"""

from __future__ import annotations

import struct

import numpy as np

from .errors import CorruptFileError


class Buffer:
    def __init__(self, data, label: str) -> None:
        self.data = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
        self.size = len(self.data)
        self.label = label

    def fail(self, what: str) -> CorruptFileError:
        return CorruptFileError(f"{self.label}: corrupt or truncated file ({what})")

    def _unpack(self, fmt: str, pos: int) -> int:
        width = struct.calcsize(fmt)
        if pos < 0 or pos + width > self.size:
            raise self.fail(f"offset {pos} out of range")
        return struct.unpack_from(fmt, self.data, pos)[0]

    def u32(self, pos: int) -> int:
        return self._unpack("<I", pos)

    def table(self, pos: int) -> Table:
        return Table(self, pos)

    def root(self) -> Table:
        return Table(self, self.u32(0))


class Table:
    """A flatbuffer table at `pos`; fields are addressed by slot number (0-based)."""

    def __init__(self, buf: Buffer, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        vtable = pos - buf._unpack("<i", pos)
        self.vtable = vtable
        self.vsize = buf._unpack("<H", vtable)
        if self.vsize < 4 or self.vsize % 2:
            raise buf.fail("bad vtable")
        buf._unpack("<H", vtable + self.vsize - 2)  # the whole vtable is in range

    def _field(self, slot: int) -> int:
        entry = 4 + 2 * slot
        if entry >= self.vsize:
            return 0
        offset = self.buf._unpack("<H", self.vtable + entry)
        return self.pos + offset if offset else 0

    def scalar(self, slot: int, fmt: str, default=0):
        at = self._field(slot)
        return self.buf._unpack("<" + fmt, at) if at else default

    def _target(self, slot: int) -> int:
        at = self._field(slot)
        return at + self.buf.u32(at) if at else 0

    def table(self, slot: int) -> Table | None:
        target = self._target(slot)
        return Table(self.buf, target) if target else None

    def string(self, slot: int) -> str | None:
        target = self._target(slot)
        return _string_at(self.buf, target) if target else None

    def vector_len(self, slot: int) -> tuple[int, int]:
        """(position of first element, length), (0, 0) if absent."""
        target = self._target(slot)
        if not target:
            return 0, 0
        return target + 4, self.buf.u32(target)

    def tables(self, slot: int) -> list[Table]:
        start, n = self.vector_len(slot)
        if start + 4 * n > self.buf.size:
            raise self.buf.fail("vector out of range")
        return [Table(self.buf, start + 4 * i + self.buf.u32(start + 4 * i)) for i in range(n)]

    def strings(self, slot: int) -> list[str]:
        start, n = self.vector_len(slot)
        if start + 4 * n > self.buf.size:
            raise self.buf.fail("vector out of range")
        return [_string_at(self.buf, start + 4 * i + self.buf.u32(start + 4 * i)) for i in range(n)]

    def array(self, slot: int, dtype: str) -> tuple[np.ndarray, int]:
        """A zero-copy numpy view of a scalar vector, and its byte offset in the buffer."""
        start, n = self.vector_len(slot)
        itemsize = np.dtype(dtype).itemsize
        if start + n * itemsize > self.buf.size:
            raise self.buf.fail("vector out of range")
        return np.frombuffer(self.buf.data, dtype=dtype, count=n, offset=start) if n else \
            np.empty(0, dtype=dtype), start


def _string_at(buf: Buffer, pos: int) -> str:
    n = buf.u32(pos)
    if pos + 4 + n > buf.size:
        raise buf.fail("string out of range")
    try:
        return bytes(buf.data[pos + 4: pos + 4 + n]).decode("utf-8")
    except UnicodeDecodeError:
        raise buf.fail("string is not UTF-8") from None
