"""Parse a big ONNX model a slice at a time, so no single protobuf call holds the GIL for long.

Why: `ModelProto.ParseFromString` is one C call that holds Python's GIL for its whole run, long
for a big graph (docs/performance.md). The app opens models in a
worker thread, but while that call runs its GUI thread cannot take the GIL: the window freezes.
Protobuf's wire format lets a message be parsed piecewise: parsing two byte strings one after the
other into the same message is the same as parsing their concatenation (repeated fields append,
in order). `parse_model` walks the top-level fields and the graph's fields in Python (a tag and a
length per field: the GIL is released between them) and hands the graph to protobuf ~1 MB at a
time.

Contract: `parse_model(data)` returns what `onnx.ModelProto.FromString(data)` returns, and raises
what it raises (`DecodeError`) for data it cannot parse: anything the walk does not understand
(groups, a truncated length) is parsed in one call the usual way.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator

import onnx
from google.protobuf.message import DecodeError

CHUNK_BYTES = 1 << 20  # graph bytes per protobuf call
GRAPH_FIELD = 7  # ModelProto.graph
LENGTH_DELIMITED = 2


class Unknown(Exception):
    """The walk met something it does not handle: parse the usual way."""


def parse_model(data: bytes | mmap.mmap, check: Callable[[], None] | None = None) -> onnx.ModelProto:
    """See the module docstring. `data` may be a memory map; `check` then runs before the walk
    and before each protobuf call (a mapped file that shrank would kill the process: it raises)."""
    model = onnx.ModelProto()
    if len(data) > 2 * CHUNK_BYTES:
        try:
            _parse_in_slices(model, data, check)
            return model
        except (Unknown, IndexError, DecodeError):  # the one-shot parse says what is wrong
            model = onnx.ModelProto()
    if check is not None:
        check()
    if isinstance(data, bytes):
        model.ParseFromString(data)
    else:
        with memoryview(data) as whole:
            model.ParseFromString(whole)
    return model


def _parse_in_slices(model: onnx.ModelProto, data: bytes | mmap.mmap, check: Callable[[], None] | None) -> None:
    if check is not None:
        check()
    found = fields(data, 0, len(data))
    view = memoryview(data)  # slices without copies (a big initializer is one slice)
    try:
        for number, wire, start, value_start, end in found:
            target, slices = ((model.graph, graph_slices(data, value_start, end))
                              if number == GRAPH_FIELD and wire == LENGTH_DELIMITED else (model, [(start, end)]))
            for a, b in slices:
                if check is not None:
                    check()
                with view[a:b] as piece:
                    target.MergeFromString(piece)
    finally:
        view.release()


def graph_fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(tag byte, field end) of each field of the graph's bytes `data[start:end]`, from their
    headers alone. A graph's fields are all length-delimited with numbers below 16 (one tag
    byte); anything else raises `Unknown`."""
    pos = start
    while pos < end:
        tag = data[pos]
        if tag >= 0x80 or tag & 7 != LENGTH_DELIMITED:
            raise Unknown()
        pos += 1
        length = data[pos]
        pos += 1
        if length >= 0x80:
            length &= 0x7F
            shift = 7
            while True:
                byte = data[pos]
                pos += 1
                length |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
                if shift > 63:
                    raise Unknown()
        pos += length
        if pos > end:
            raise Unknown()
        yield tag, pos


def graph_slices(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """Where to cut the graph's bytes `data[start:end]`: whole fields, ~CHUNK_BYTES per slice."""
    slices = []
    chunk = start
    for _tag, pos in graph_fields(data, start, end):
        if pos - chunk >= CHUNK_BYTES:
            slices.append((chunk, pos))
            chunk = pos
    if chunk < end:
        slices.append((chunk, end))
    return slices


def fields(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """(field number, wire type, field start, value start, field end) of each top-level field."""
    found = []
    pos = start
    try:
        while pos < end:
            field_start = pos
            key, pos = _varint(data, pos)
            number, wire = key >> 3, key & 7
            value_start = pos
            if wire == 0:
                _, pos = _varint(data, pos)
            elif wire == 1:
                pos += 8
            elif wire == 2:
                length, pos = _varint(data, pos)
                value_start = pos
                pos += length
            elif wire == 5:
                pos += 4
            else:
                raise Unknown()
            if pos > end or number == 0:
                raise Unknown()
            found.append((number, wire, field_start, value_start, pos))
    except IndexError:
        raise Unknown() from None
    return found


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise Unknown()
