"""Write ONNX Runtime training checkpoints (flatbuffer, version 2) without the training package.

Layout, front to back: identifier and root offset, then every table/string/dims vector (small,
built in memory, children after parents so all offsets point forward), then the `raw_data`
vectors, streamed one tensor at a time. With `external_data`, tensor bytes go to
`<path>.data` instead (packed, 4-byte aligned, 8 for 64-bit types), as ORT writes them.
Written atomically (temp files, fsync, rename). ORT's `CheckpointState.load_checkpoint` reads
the result; benchmarks use it to build multi-GB checkpoints quickly.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from .params import c_contiguous

VERSION = 2


@dataclass
class _Tensor:
    name: str
    array: np.ndarray | None  # None for nominal tensors (names and types only)
    elem_type: int = onnx.TensorProto.FLOAT
    table_fixups: list = field(default_factory=list)
    raw_field: int = -1  # position of the raw_data uoffset field, patched after layout
    external_offset_field: int = -1


class _Meta:
    """A front-to-back flatbuffer builder for the small part of the file."""

    def __init__(self) -> None:
        self.buf = bytearray(8)  # root uoffset + identifier
        self.buf[4:8] = b"ODTC"
        self.fixups: list[tuple[int, object]] = []  # (uoffset field position, key)
        self.where: dict[int, int] = {}  # id(key) -> position

    def align(self, n: int, extra: int = 0) -> None:
        while (len(self.buf) + extra) % n:
            self.buf.append(0)

    def table(self, key: object, fields: list[tuple[int, str, object]]) -> dict[int, int]:
        """Write a table; fields (slot, fmt, value) with fmt in i/q/f/B or 'o' (offset to key)."""
        nslots = max((s for s, _, _ in fields), default=-1) + 1
        sizes = {"i": 4, "q": 8, "f": 4, "B": 1, "o": 4}
        inline = 4
        layout: list[tuple[int, str, object, int]] = []
        for slot, fmt, value in sorted(fields, key=lambda f: -sizes[f[1]]):
            size = sizes[fmt]
            inline = (inline + size - 1) // size * size
            layout.append((slot, fmt, value, inline))
            inline += size
        vsize = 4 + 2 * nslots
        self.align(2)
        vtable_pos = len(self.buf)
        entries = [0] * nslots
        for slot, _, _, off in layout:
            entries[slot] = off
        self.buf += struct.pack(f"<HH{nslots}H", vsize, inline, *entries)
        self.align(8)
        table_pos = len(self.buf)
        self.buf += bytes(inline)
        struct.pack_into("<i", self.buf, table_pos, table_pos - vtable_pos)
        positions = {}
        for slot, fmt, value, off in layout:
            at = table_pos + off
            positions[slot] = at
            if fmt == "o":
                if value is not None:
                    self.fixups.append((at, value))
            else:
                struct.pack_into("<" + fmt, self.buf, at, value)
        self.where[id(key)] = table_pos
        return positions

    def string(self, key: object, text: str) -> None:
        data = text.encode("utf-8")
        self.align(4)
        self.where[id(key)] = len(self.buf)
        self.buf += struct.pack("<I", len(data)) + data + b"\0"

    def vector(self, key: object, data: bytes, count: int, elem_align: int) -> None:
        self.align(max(elem_align, 4), extra=4)
        self.where[id(key)] = len(self.buf)
        self.buf += struct.pack("<I", count) + data

    def offsets(self, key: object, targets: list[object]) -> None:
        self.align(4)
        self.where[id(key)] = len(self.buf)
        self.buf += struct.pack("<I", len(targets))
        for target in targets:
            self.fixups.append((len(self.buf), target))
            self.buf += bytes(4)

    def resolve(self) -> None:
        for at, key in self.fixups:
            target = self.where[id(key)]
            struct.pack_into("<I", self.buf, at, target - at)


class _Key:
    """A unique key object for a table/vector/string to be placed."""


def _write_tensor_meta(meta: _Meta, t: _Tensor, external: bool) -> _Key:
    key, name_key, dims_key, empty_raw = _Key(), _Key(), _Key(), _Key()
    dims = [] if t.array is None else list(t.array.shape)
    elem_type = onnx.helper.np_dtype_to_tensor_dtype(t.array.dtype) if t.array is not None else t.elem_type
    fields = [(0, "o", name_key), (2, "o", dims_key), (3, "i", elem_type)]
    if t.array is None:  # nominal: ORT writes empty dims and an empty raw_data vector
        fields += [(4, "o", empty_raw), (6, "q", -1)]
    else:
        fields.append((6, "q", -1) if not external else (6, "q", 0))
        if not external:
            fields.append((4, "o", None))
    pos = meta.table(key, fields)
    t.raw_field = pos.get(4, -1)
    t.external_offset_field = pos.get(6, -1) if external else -1
    meta.string(name_key, t.name)
    meta.vector(dims_key, struct.pack(f"<{len(dims)}q", *dims), len(dims), 8)
    if t.array is None:
        meta.vector(empty_raw, b"", 0, 1)
    return key


def _make(name: str, array, nominal: bool) -> _Tensor:
    array = np.asarray(array)
    elem_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    return _Tensor(name, None if nominal else c_contiguous(array), elem_type)


def write_checkpoint(
    path: str | Path,
    params: Mapping[str, np.ndarray],
    *,
    frozen: Iterable[str] = (),
    nominal: bool = False,
    external_data: bool = False,
    optimizer: Mapping[str, dict] | None = None,
    properties: Mapping[str, int | float | str] | None = None,
) -> Path:
    """Write `params` as an ORT checkpoint at `path` (see the module docstring).

    `optimizer`: {group name: {"step": int, "learning_rate": float,
    "states": {param: {"momentum0": array, "momentum1": array}}}}.
    """
    path = Path(path)
    frozen = set(frozen)
    trainable_tensors = [_make(n, a, nominal) for n, a in params.items() if n not in frozen]
    frozen_tensors = [_make(n, a, nominal) for n, a in params.items() if n in frozen]
    external = external_data and not nominal
    meta = _Meta()
    root, state = _Key(), _Key()
    trainable_vec, frozen_vec, groups_vec, bag = _Key(), _Key(), _Key(), _Key()
    groups = list((optimizer or {}).items())
    root_fields = [(0, "i", VERSION), (1, "o", state)]
    if groups:
        root_fields.append((2, "o", groups_vec))
    if properties:
        root_fields.append((3, "o", bag))
    meta.table(root, root_fields)
    struct.pack_into("<I", meta.buf, 0, meta.where[id(root)])
    meta.table(state, [(0, "o", trainable_vec), (1, "o", frozen_vec), (2, "B", int(nominal)),
                       (3, "B", int(external))])
    all_tensors: list[_Tensor] = []
    for vec, tensors in ((trainable_vec, trainable_tensors), (frozen_vec, frozen_tensors)):
        keys = [_Key() for _ in tensors]
        meta.offsets(vec, keys)
        for k, t in zip(keys, tensors):
            meta.where[id(k)] = meta.where[id(_write_tensor_meta(meta, t, external))]
        all_tensors += tensors
    if groups:
        all_tensors += _write_groups(meta, groups_vec, groups, external, nominal)
    if properties:
        _write_properties(meta, bag, properties)
    meta.resolve()
    return _stream(path, meta, all_tensors, external)


def _write_groups(meta: _Meta, vec: _Key, groups: list, external: bool, nominal: bool) -> list[_Tensor]:
    keys = [_Key() for _ in groups]
    meta.offsets(vec, keys)
    tensors: list[_Tensor] = []
    for key, (name, group) in zip(keys, groups):
        name_key, states_vec = _Key(), _Key()
        meta.table(key, [(0, "o", name_key), (1, "q", int(group.get("step", 0))),
                         (2, "f", float(group.get("learning_rate", 0.0))), (3, "o", states_vec)])
        meta.string(name_key, name)
        states = list(group.get("states", {}).items())
        state_keys = [_Key() for _ in states]
        meta.offsets(states_vec, state_keys)
        for skey, (param, moments) in zip(state_keys, states):
            pname, mvec = _Key(), _Key()
            meta.table(skey, [(0, "o", pname), (1, "o", mvec)])
            meta.string(pname, param)
            mts = [_make(m, a, nominal) for m, a in moments.items()]
            mkeys = [_Key() for _ in mts]
            meta.offsets(mvec, mkeys)
            for mk, t in zip(mkeys, mts):
                meta.where[id(mk)] = meta.where[id(_write_tensor_meta(meta, t, external))]
            tensors += mts
    return tensors


def _write_properties(meta: _Meta, bag: _Key, properties: Mapping) -> None:
    kinds = {0: [], 1: [], 2: []}
    for name, value in properties.items():
        kind = 2 if isinstance(value, str) else 1 if isinstance(value, float) else 0
        kinds[kind].append((name, value))
    vecs = {k: _Key() for k in kinds}
    meta.table(bag, [(k, "o", vecs[k]) for k in kinds])
    for kind, items in kinds.items():
        keys = [_Key() for _ in items]
        meta.offsets(vecs[kind], keys)
        for key, (name, value) in zip(keys, items):
            nkey, vkey = _Key(), _Key()
            if kind == 2:
                meta.table(key, [(0, "o", nkey), (1, "o", vkey)])
                meta.string(nkey, name)
                meta.string(vkey, value)
            else:
                meta.table(key, [(0, "o", nkey), (1, "q" if kind == 0 else "f", value)])
                meta.string(nkey, name)


def _stream(path: Path, meta: _Meta, tensors: list[_Tensor], external: bool) -> Path:
    folder = path.parent if str(path.parent) else Path(".")
    temps: list[str] = []
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        temps.append(tmp)
        with_data = [t for t in tensors if t.array is not None]
        if external:
            dfd, dtmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.data.", suffix=".tmp")
            temps.append(dtmp)
            offset = 0
            with os.fdopen(dfd, "wb") as data:
                for t in with_data:
                    align = 8 if t.array.dtype.itemsize == 8 else 4
                    pad = (-offset) % align
                    data.write(b"\0" * pad)
                    offset += pad
                    struct.pack_into("<q", meta.buf, t.external_offset_field, offset)
                    data.write(memoryview(t.array.reshape(-1).view(np.uint8)))
                    offset += t.array.nbytes
                data.flush()
                os.fsync(data.fileno())
        with os.fdopen(fd, "wb") as out:
            end = len(meta.buf)
            plan = []
            if not external:
                for t in with_data:
                    end += (-(end + 4)) % 16  # data 16-byte aligned
                    plan.append((t, end))
                    struct.pack_into("<I", meta.buf, t.raw_field, end - t.raw_field)
                    end += 4 + t.array.nbytes
            out.write(meta.buf)
            pos = len(meta.buf)
            for t, at in plan:
                out.write(b"\0" * (at - pos))
                out.write(struct.pack("<I", t.array.nbytes))
                out.write(memoryview(t.array.reshape(-1).view(np.uint8)))
                pos = at + 4 + t.array.nbytes
            out.flush()
            os.fsync(out.fileno())
        for t in temps:
            os.chmod(t, 0o644)
        if external:
            os.replace(temps[1], path.with_name(path.name + ".data"))
        os.replace(tmp, path)
        temps.clear()
        return path
    finally:
        for t in temps:
            try:
                os.unlink(t)
            except OSError:
                pass
