"""Lay out the metadata of an ORT checkpoint flatbuffer, front to back (for `checkpoint_writer`).

Contract: `Builder` appends tables, strings and vectors to a bytearray in the order they are
given; a uoffset to something not yet placed is recorded against a `Ref` and patched by
`finish()`. Parents are written before their children, so every uoffset points forward, as the
format requires (uoffsets are unsigned). A `Ref` may also be placed past the end of the
metadata (the streamed `raw_data` vectors) by setting `ref.pos` before `finish()`.
Alignment follows FlatBuffers' verifier: tables 8-aligned with fields aligned to their size,
strings and vectors 4-aligned, vector elements aligned to their size; strings end with a NUL.
Also here: normalizing the writer's optimizer-state and property arguments, and their tables.
"""

from __future__ import annotations

import functools
import math
import numbers
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from onnxport.core.io.checkpoint import (
    OG_LR,
    OG_NAME,
    OG_STATES,
    OG_STEP,
    PB_FLOATS,
    PB_INTS,
    PB_STRINGS,
    POS_MOMENTUMS,
    POS_PARAM_NAME,
    PROP_NAME,
    PROP_VALUE,
)
from onnxport.core.io.parameter_set import OptimizerGroupState
from onnxport.core.util.errors import OnnxportError

_SIZES = {"B": 1, "i": 4, "f": 4, "q": 8, "o": 4}
FLOAT32_MAX = 3.4028234663852886e38


_I32 = struct.Struct("<i")
_FORMATS = {"B": "<B", "i": "<i", "f": "<f", "q": "<q"}


@functools.lru_cache(maxsize=64)
def _layout(signature: tuple[tuple[int, str], ...]) -> tuple[bytes, int, tuple[int, ...]]:
    """(vtable bytes, table size, each field's offset in the table) for (slot, fmt) fields.

    Fields are laid out largest first, each aligned to its size, after the 4-byte soffset.
    """
    nslots = max((slot for slot, _ in signature), default=-1) + 1
    by_slot, size = {}, 4
    for slot, fmt in sorted(signature, key=lambda f: -_SIZES[f[1]]):
        width = _SIZES[fmt]
        size += (-size) % width
        by_slot[slot] = size
        size += width
    vtable = struct.pack(f"<HH{nslots}H", 4 + 2 * nslots, size, *(by_slot.get(s, 0) for s in range(nslots)))
    return vtable, size, tuple(by_slot[slot] for slot, _ in signature)


class Ref:
    """Where something is (or will be) placed; -1 until placed."""

    __slots__ = ("pos",)

    def __init__(self) -> None:
        self.pos = -1


class Builder:
    def __init__(self, identifier: bytes) -> None:
        self.buf = bytearray(8)  # root uoffset, then the file identifier
        self.buf[4:8] = identifier
        self.patches: list[tuple[int, Ref]] = []

    def set_root(self, ref: Ref) -> None:
        self.patches.append((0, ref))

    def _pad(self, align: int, extra: int = 0) -> None:
        self.buf += bytes((-(len(self.buf) + extra)) % align)

    def table(self, ref: Ref, fields: list[tuple[int, str, object]]) -> dict[int, int]:
        """Place a table; fields are (slot, fmt, value), fmt one of B/i/f/q or o (a Ref).

        Returns slot -> absolute position of the field's value.
        """
        vtable_bytes, size, offsets = _layout(tuple((slot, fmt) for slot, fmt, _ in fields))
        buf = self.buf
        buf += bytes(len(buf) % 2)
        vtable = len(buf)
        buf += vtable_bytes
        buf += bytes(-len(buf) % 8)
        ref.pos = start = len(buf)
        buf += bytes(size)
        _I32.pack_into(buf, start, start - vtable)
        positions = {}
        for (slot, fmt, value), offset in zip(fields, offsets):
            at = positions[slot] = start + offset
            if fmt == "o":
                self.patches.append((at, value))
            else:
                struct.pack_into(_FORMATS[fmt], buf, at, value)
        return positions

    def string(self, ref: Ref, text: str | bytes) -> None:
        data = text.encode("utf-8") if isinstance(text, str) else text
        self._pad(4)
        ref.pos = len(self.buf)
        self.buf += struct.pack("<I", len(data)) + data + b"\0"

    def scalars(self, ref: Ref, payload: bytes, count: int, align: int) -> None:
        """A vector of scalars: count, then `payload` aligned to `align`."""
        self._pad(max(align, 4), extra=4)
        ref.pos = len(self.buf)
        self.buf += struct.pack("<I", count) + payload

    def offsets(self, ref: Ref, targets: list[Ref]) -> None:
        """A vector of uoffsets (tables or strings placed later)."""
        self._pad(4)
        ref.pos = len(self.buf)
        self.buf += struct.pack("<I", len(targets)) + bytes(4 * len(targets))
        for i, target in enumerate(targets):
            self.patches.append((ref.pos + 4 + 4 * i, target))

    def finish(self) -> None:
        for at, ref in self.patches:
            if ref.pos <= at:
                raise AssertionError(f"flatbuffer layout bug: offset at {at} points to {ref.pos}")
            struct.pack_into("<I", self.buf, at, ref.pos - at)


@dataclass
class GroupSpec:
    """One optimizer group to write: (param name, [momentum items]) per parameter."""

    name: str
    step: int
    learning_rate: float
    states: list[tuple[str, list]] = field(default_factory=list)


def normalize_groups(optimizer, make_item: Callable[[str, object], object]) -> list[GroupSpec]:
    """Accept `{group: {"step", "learning_rate", "states": {param: {momentum: value}}}}` or
    `OptimizerGroupState`s; `make_item(momentum name, value)` turns values into writer items."""
    if not optimizer:
        return []
    entries = optimizer.items() if isinstance(optimizer, Mapping) else ((None, g) for g in optimizer)
    groups: list[GroupSpec] = []
    for key, group in entries:
        if isinstance(group, OptimizerGroupState):
            name, step, lr, states = group.name, group.step, group.initial_learning_rate, group.states
        elif isinstance(group, Mapping) and key is not None:
            name, step, states = key, group.get("step", 0), group.get("states", {})
            lr = group.get("learning_rate", group.get("initial_learning_rate", 0.0))
        else:
            raise OnnxportError(f"optimizer state: expected a group mapping or OptimizerGroupState, got {group!r}")
        spec = GroupSpec(str(name), _int64(step, f"optimizer group '{name}' step"),
                         _float32(lr, f"optimizer group '{name}' learning rate"))
        for param, moments in states.items():
            spec.states.append((str(param), [make_item(m, v) for m, v in moments.items()]))
        groups.append(spec)
    return groups


def build_groups(b: Builder, vec: Ref, groups: list[GroupSpec],
                 tensor_list: Callable[[Ref, list], None]) -> None:
    """Optimizer group tables; `tensor_list(vector ref, items)` places a vector of tensors."""
    refs = [Ref() for _ in groups]
    b.offsets(vec, refs)
    for ref, group in zip(refs, groups):
        name, states = Ref(), Ref()
        b.table(ref, [(OG_NAME, "o", name), (OG_STEP, "q", group.step), (OG_LR, "f", group.learning_rate),
                      (OG_STATES, "o", states)])
        b.string(name, group.name)
        state_refs = [Ref() for _ in group.states]
        b.offsets(states, state_refs)
        for state_ref, (param, items) in zip(state_refs, group.states):
            pname, moments = Ref(), Ref()
            b.table(state_ref, [(POS_PARAM_NAME, "o", pname), (POS_MOMENTUMS, "o", moments)])
            b.string(pname, param)
            tensor_list(moments, items)


def _int64(value, what: str) -> int:
    if not isinstance(value, numbers.Integral) or not -(2**63) <= int(value) < 2**63:
        raise OnnxportError(f"{what} must be an int64, got {value!r}")
    return int(value)


def _float32(value, what: str) -> float:
    if not isinstance(value, numbers.Real) or (math.isfinite(value) and abs(value) > FLOAT32_MAX):
        raise OnnxportError(f"{what} must be a float32, got {value!r}")
    return float(value)


def normalize_properties(properties: Mapping | None) -> list[tuple[int, str, object]]:
    """[(kind, name, value)], kind PB_INTS / PB_FLOATS / PB_STRINGS, from int/float/str values."""
    result = []
    for name, value in (properties or {}).items():
        if not isinstance(name, str):
            raise OnnxportError(f"property names must be strings, got {name!r}")
        if isinstance(value, str):
            result.append((PB_STRINGS, name, value))
        elif isinstance(value, numbers.Integral):  # bool and numpy ints too
            result.append((PB_INTS, name, _int64(value, f"property '{name}'")))
        elif isinstance(value, numbers.Real):
            result.append((PB_FLOATS, name, _float32(value, f"property '{name}'")))
        else:
            raise OnnxportError(f"property '{name}': {type(value).__name__} values cannot be stored "
                                f"(int, float and str only)")
    return result


def build_properties(b: Builder, bag: Ref, props: list[tuple[int, str, object]]) -> None:
    kinds = (PB_INTS, PB_FLOATS, PB_STRINGS)
    vectors = {k: Ref() for k in kinds}
    b.table(bag, [(k, "o", vectors[k]) for k in kinds])
    for kind in kinds:
        entries = [(n, v) for k, n, v in props if k == kind]
        refs = [Ref() for _ in entries]
        b.offsets(vectors[kind], refs)
        for ref, (name, value) in zip(refs, entries):
            name_ref = Ref()
            if kind == PB_STRINGS:
                value_ref = Ref()
                b.table(ref, [(PROP_NAME, "o", name_ref), (PROP_VALUE, "o", value_ref)])
                b.string(name_ref, name)
                b.string(value_ref, value)
            else:
                b.table(ref, [(PROP_NAME, "o", name_ref), (PROP_VALUE, "q" if kind == PB_INTS else "f", value)])
                b.string(name_ref, name)
