"""Byte-level and structure-aware mutations for the reader fuzz tests.

Byte operations (`OPS`, applied by `mutate`): set/xor a byte, truncate, insert, delete, splice a
chunk of the file over another place, write an interesting integer at a random place, and
`hot`: write an interesting value into a *structural field* of the file, found by `hot_fields`
from the file's layout, so that mutations hit what parsers trust:
- flatbuffer: 4-aligned words that look like offsets or counts (uoffsets, vector lengths);
- zip: the size/offset/length fields of local headers, central directory and end records;
- protobuf / pbseq: the varints of length-delimited fields (re-encoded, so lengths can grow);
- safetensors: the 8-byte header length; text numbers (JSON headers, .npy header dicts);
- pickle: the integer arguments of pickle opcodes (storage sizes, shapes, offsets).
Interesting values include 0, +-1, powers of two around every integer width and `("size", d)`:
the file's length plus d (offsets just past the end).
"""

from __future__ import annotations

import io
import pickletools
import re
import zipfile

from hypothesis import strategies as st

from onnxport.core.export.wire_format import varint

INTERESTING = (0, 1, 2, 3, 4, 7, 8, 16, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF,
               0x80000000, 0xFFFFFFFF, 1 << 32, 1 << 40, 1 << 62, (1 << 63) - 1, 1 << 63, (1 << 64) - 1,
               -1, -2, -(1 << 31), -(1 << 63))
VALUES = st.one_of(st.sampled_from(INTERESTING), st.tuples(st.just("size"), st.integers(-64, 64)),
                   st.integers(-(1 << 63), (1 << 64) - 1))
POS = st.integers(min_value=0, max_value=1 << 20)
OPS = st.one_of(
    st.tuples(st.just("hot"), POS, VALUES),
    st.tuples(st.just("set"), POS, st.integers(0, 255)),
    st.tuples(st.just("xor"), POS, st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 255])),
    st.tuples(st.just("truncate"), POS),
    st.tuples(st.just("insert"), POS, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), POS, st.integers(1, 64)),
    st.tuples(st.just("splice"), POS, POS, st.integers(1, 256)),
    st.tuples(st.just("int"), POS, st.sampled_from([1, 2, 4, 8]), VALUES),
    st.tuples(st.just("hot"), POS, VALUES),
)
EDITS = st.lists(OPS, min_size=1, max_size=4)

Field = tuple[int, str, int]  # (position, kind: le | varint | text, width in bytes)


def _value(value, size: int) -> int:
    return size + value[1] if isinstance(value, tuple) else value


def _write(out: bytearray, field: Field, value: int) -> None:
    pos, kind, width = field
    if kind == "le":
        out[pos:pos + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    elif kind == "varint":
        out[pos:pos + width] = varint(value % (1 << 64))
    else:
        out[pos:pos + width] = str(value).encode()


def mutate(data: bytes, edits, layout: str) -> bytes:
    """`data` with `edits` (from EDITS) applied in order; positions wrap around the length."""
    hot = hot_fields(data, layout)
    out = bytearray(data)
    for op in edits:
        kind, n = op[0], len(out)
        if kind == "insert":
            at = op[1] % (n + 1)
            out[at:at] = op[2]
        elif n == 0:
            continue
        elif kind == "hot":
            if hot:
                field = hot[op[1] % len(hot)]
                if field[0] + field[2] <= n:
                    _write(out, field, _value(op[2], n))
        elif kind == "set":
            out[op[1] % n] = op[2]
        elif kind == "xor":
            out[op[1] % n] ^= op[2]
        elif kind == "truncate":
            del out[op[1] % n:]
        elif kind == "delete":
            at = op[1] % n
            del out[at:at + op[2]]
        elif kind == "splice":
            src, dst = op[1] % n, op[2] % n
            out[dst:dst + op[3]] = out[src:src + op[3]]
        elif kind == "int":
            at = op[1] % n
            _write(out, (at, "le", op[2]), _value(op[3], n))
    return bytes(out)


def hot_fields(data: bytes, layout: str) -> list[Field]:
    if layout == "flatbuffer":
        return _flatbuffer_words(data)
    if layout == "zip":
        return _zip_fields(data) + _text_numbers(data)
    if layout == "protobuf":
        return _proto_varints(data, 0, len(data), 0) or []
    if layout == "pbseq":
        return _pbseq_varints(data)
    if layout == "safetensors":
        return [(0, "le", 8)] + _text_numbers(data[:8 + min(len(data), 1 << 16)])
    if layout == "pickle":
        return _pickle_ints(data)
    if layout == "text":
        return _text_numbers(data)
    return []


def _flatbuffer_words(data: bytes) -> list[Field]:
    size = len(data)
    return [(i, "le", 4) for i in range(0, size - 3, 4)
            if 0 < int.from_bytes(data[i:i + 4], "little") < size or i < 8]


# (signature, [(offset, width) of its size/count/offset fields])
_ZIP_RECORDS = (
    (b"PK\x03\x04", [(6, 2), (8, 2), (14, 4), (18, 4), (22, 4), (26, 2), (28, 2)]),
    (b"PK\x01\x02", [(8, 2), (10, 2), (16, 4), (20, 4), (24, 4), (28, 2), (30, 2), (32, 2), (42, 4)]),
    (b"PK\x05\x06", [(8, 2), (10, 2), (12, 4), (16, 4), (20, 2)]),
    (b"PK\x06\x06", [(24, 8), (32, 8), (40, 8), (48, 8)]),
    (b"PK\x06\x07", [(8, 8)]),
    (b"\x01\x00\x18\x00", [(4, 8), (12, 8), (20, 8)]),  # zip64 extra field (central directory)
)


def _zip_fields(data: bytes) -> list[Field]:
    fields = []
    for signature, offsets in _ZIP_RECORDS:
        for match in re.finditer(re.escape(signature), data):
            fields += [(match.start() + off, "le", width) for off, width in offsets
                       if match.start() + off + width <= len(data)]
    return fields


def _text_numbers(data: bytes) -> list[Field]:
    return [(m.start(), "text", m.end() - m.start()) for m in re.finditer(rb"-?[0-9]+", data)][:512]


def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    result = shift = 0
    while pos < end and shift < 64:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    return None


def _proto_varints(data: bytes, start: int, end: int, depth: int) -> list[Field] | None:
    """Length varints of every length-delimited field, recursing into payloads that parse as
    messages; None if [start, end) is not a protobuf message."""
    fields: list[Field] = []
    pos = start
    while pos < end:
        key = _read_varint(data, pos, end)
        if key is None or key[0] >> 3 == 0:
            return None
        wire, pos = key[0] & 7, key[1]
        if wire == 0:
            value = _read_varint(data, pos, end)
            if value is None:
                return None
            fields.append((pos, "varint", value[1] - pos))
            pos = value[1]
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            length = _read_varint(data, pos, end)
            if length is None or length[1] + length[0] > end:
                return None
            fields.append((pos, "varint", length[1] - pos))
            pos = length[1]
            if depth < 8 and length[0]:
                fields += _proto_varints(data, pos, pos + length[0], depth + 1) or []
            pos += length[0]
        else:
            return None
    return fields if pos == end else None


def _pbseq_varints(data: bytes) -> list[Field]:
    count = _read_varint(data, 0, len(data))
    if count is None:
        return []
    fields: list[Field] = [(0, "varint", count[1])]
    pos = count[1]
    for _ in range(min(count[0], 64)):
        length = _read_varint(data, pos, len(data))
        if length is None:
            break
        fields.append((pos, "varint", length[1] - pos))
        pos = length[1]
        fields += _proto_varints(data, pos, min(pos + length[0], len(data)), 1) or []
        pos += length[0]
    return fields


_PICKLE_INT_ARGS = {"BININT": 4, "BININT1": 1, "BININT2": 2, "LONG1": None, "BINPUT": 1, "BINGET": 1}


def _pickle_ints(data: bytes) -> list[Field]:
    """Integer arguments of the pickles in `data`, one after another (torch's legacy format holds
    several, then raw storages: each storage's 8-byte element count is found as well)."""
    fields: list[Field] = []
    stream = io.BytesIO(data)
    try:
        for _ in range(8):
            for opcode, _arg, pos in pickletools.genops(stream):  # pos: in `data`
                width = _PICKLE_INT_ARGS.get(opcode.name, 0)
                if opcode.name == "LONG1" and pos + 1 < len(data):
                    width = data[pos + 1]
                    fields.append((pos + 2, "le", width)) if width else None
                elif width:
                    fields.append((pos + 1, "le", width))
            fields.append((stream.tell(), "le", 8))  # a storage's element count, if one follows
    except Exception:  # noqa: BLE001 - garbage or raw bytes: the fields found so far
        pass
    return [f for f in fields if f[0] + f[2] <= len(data)]


def member_layout(name: str) -> str:
    if name.endswith(".pkl"):
        return "pickle"
    if name.endswith((".json", ".npy")) or name.rsplit("/", 1)[-1] in ("version", "byteorder", "archive_format"):
        return "text"
    return "raw"


def rezip(data: bytes, member: int, edits) -> bytes:
    """The zip `data` with one member's bytes mutated and the archive rewritten around it (CRC,
    sizes and offsets right), so that readers get past zipfile into the member's own format."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        infos = zin.infolist()
        chosen = infos[member % len(infos)].filename
        for info in infos:
            payload = zin.read(info)
            if info.filename == chosen:
                payload = mutate(payload, edits, member_layout(info.filename))
            zout.writestr(info, payload, compress_type=info.compress_type)
    return out.getvalue()
