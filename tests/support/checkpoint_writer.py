"""Write ONNX Runtime training checkpoints (flatbuffer, version 2) without the training package.

Contract: `write_checkpoint(path, params, ...)` writes a file that ORT's
`CheckpointState.load_checkpoint` loads and `read_checkpoint` reads back bit for bit:
- layout, front to back: root uoffset and the `ODTC` identifier; every table, string and dims
  vector (small, built in memory, parents before children so every uoffset points forward); then
  the `raw_data` vectors, 16-byte aligned, streamed one tensor at a time. Only one tensor's bytes
  are ever in Python memory (none when a value is a `ParamTensor` with a file span: those bytes
  are copied file-to-file by the kernel);
- with external data (always, never, or automatically past ~1.8 GiB like ORT), tensors of 64
  bytes or more go to `<path>.data` instead, packed and padded to 4 bytes (8 for 64-bit types),
  with `external_data_offset` set; strings and small tensors stay inline, as ORT does;
- nominal checkpoints hold names, types and trainability only (dims `[]`, empty `raw_data`);
- atomic: temp files in the destination folder, fsync, then `os.replace` (the `.data` first). A
  failure or a cancel removes the temp files and leaves any existing checkpoint untouched
  (`checkpoint_stream` does the writing; `checkpoint_layout` builds the metadata).
Values are numpy arrays (anything `np.asarray` accepts; strings become `string_data`) or
`ParamTensor`s (e.g. from `read_checkpoint`, to convert or merge checkpoints; bfloat16/float8
keep their ONNX type that way). Note: ORT 1.19's `load_checkpoint` only accepts float32/64,
(u)int8/16/32/64 and bool tensors; it rejects float16, bfloat16, float8, complex and strings,
which onnxport writes and reads all the same.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onnxport.core.io.checkpoint import (
    IDENTIFIER,
    MS_FROZEN,
    MS_HAS_EXTERNAL,
    MS_IS_NOMINAL,
    MS_REQUIRES_GRAD,
    STRING,
    T_DATA_TYPE,
    T_DIMS,
    T_EXTERNAL_OFFSET,
    T_NAME,
    T_RAW_DATA,
    T_STRING_DATA,
    storage_dtype,
)
from onnxport.core.io.parameter_set import ParamTensor
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter
from tests.support.checkpoint_layout import (
    Builder,
    Ref,
    build_groups,
    build_properties,
    normalize_groups,
    normalize_properties,
)
from tests.support.checkpoint_stream import check_destination, write_files

VERSION = 2
INLINE_LIMIT = 2**31 - 1  # flatbuffers' largest buffer; ORT's verifier rejects bigger files
AUTO_EXTERNAL_BYTES = 1800 << 20  # like ORT: tensor bytes past this spill to <path>.data
MIN_EXTERNAL_BYTES = 64  # like ORT: smaller tensors stay inline even with external data
RAW_ALIGN = 16

_BY_KIND = {("f", 4): 1, ("u", 1): 2, ("i", 1): 3, ("u", 2): 4, ("i", 2): 5, ("i", 4): 6, ("i", 8): 7,
            ("b", 1): 9, ("f", 2): 10, ("f", 8): 11, ("u", 4): 12, ("u", 8): 13, ("c", 8): 14, ("c", 16): 15}
_BY_NAME = {"bfloat16": 16, "float8_e4m3fn": 17, "float8_e4m3fnuz": 18, "float8_e5m2": 19, "float8_e5m2fnuz": 20}


def onnx_type_of(dtype: np.dtype, what: str = "array") -> int:
    """ONNX element type for a numpy dtype (ml_dtypes' bfloat16/float8 included)."""
    if dtype.kind in "OSU":
        return STRING
    code = _BY_KIND.get((dtype.kind, dtype.itemsize)) or _BY_NAME.get(dtype.name)
    if code is None:
        raise OnnxportError(f"{what}: numpy dtype {dtype} has no ONNX tensor type")
    return code


@dataclass
class _Item:
    """One tensor to write."""

    name: str
    elem_type: int
    shape: tuple[int, ...]
    nbytes: int  # raw bytes (0 for strings and nominal tensors)
    value: object  # np.ndarray | ParamTensor | None (nominal)
    strings: list[bytes] | None = None
    external: bool = False
    raw: Ref | None = None  # the raw_data vector (inline tensors)
    offset_field: int = -1  # where external_data_offset sits in the metadata
    itemsize: int = 1


def _item(name: object, value, nominal: bool) -> _Item:
    if not isinstance(name, str) or not name:
        raise OnnxportError(f"checkpoint tensor names must be non-empty strings, got {name!r}")
    if isinstance(value, ParamTensor):
        elem_type, shape = value.elem_type, tuple(int(d) for d in value.shape)
        dtype = storage_dtype(elem_type)
        if dtype is None:
            raise OnnxportError(f"tensor '{name}': ONNX type {elem_type} cannot be written to a checkpoint")
    else:
        value = np.asarray(value)
        elem_type, shape, dtype = onnx_type_of(value.dtype, f"tensor '{name}'"), value.shape, value.dtype
    if nominal:
        return _Item(name, elem_type, shape, 0, None)
    if elem_type == STRING:
        values = value.array() if isinstance(value, ParamTensor) else value
        return _Item(name, elem_type, shape, 0, None, strings=[_encode(v, name) for v in np.asarray(values).flat])
    numel = 1
    for d in shape:
        numel *= d
    return _Item(name, elem_type, shape, numel * dtype.itemsize, value, itemsize=dtype.itemsize)


def _encode(value, name: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise OnnxportError(f"tensor '{name}': string tensors hold str or bytes, not {type(value).__name__}")


def _tensor_meta(b: Builder, item: _Item, nominal: bool, ref: Ref) -> None:
    name, dims = Ref(), Ref()
    fields: list[tuple[int, str, object]] = [(T_NAME, "o", name), (T_DIMS, "o", dims),
                                             (T_DATA_TYPE, "i", item.elem_type)]
    strings = Ref() if item.strings is not None else None
    if strings is not None:
        fields.append((T_STRING_DATA, "o", strings))
    elif item.external:
        fields.append((T_EXTERNAL_OFFSET, "q", 0))  # set once the data file is laid out
    else:
        item.raw = Ref()
        fields.append((T_RAW_DATA, "o", item.raw))
    positions = b.table(ref, fields)
    item.offset_field = positions.get(T_EXTERNAL_OFFSET, -1)
    b.string(name, item.name)
    shape = () if nominal else item.shape
    b.scalars(dims, struct.pack(f"<{len(shape)}q", *shape), len(shape), 8)
    if strings is not None:
        refs = [Ref() for _ in item.strings]
        b.offsets(strings, refs)
        for r, s in zip(refs, item.strings):
            b.string(r, s)
    elif nominal:  # ORT writes an empty raw_data vector
        b.scalars(item.raw, b"", 0, 1)


def _tensor_list(b: Builder, vec: Ref, items: list[_Item], nominal: bool) -> None:
    refs = [Ref() for _ in items]
    b.offsets(vec, refs)  # the vector first: its uoffsets must point forward
    for ref, item in zip(refs, items):
        _tensor_meta(b, item, nominal, ref)


def write_checkpoint(
    path: str | Path,
    params: Mapping[str, object],
    *,
    frozen: Iterable[str] = (),
    trainable: Iterable[str] | None = None,
    nominal: bool = False,
    external_data: bool | None = None,
    optimizer: Mapping[str, Mapping] | Iterable | None = None,
    properties: Mapping[str, int | float | str] | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> Path:
    """Write `params` as an ORT training checkpoint at `path`; return `path`.

    Trainability: names in `frozen` go to `frozen_params`, the rest to `requires_grad_params`;
    or give `trainable` and every other name is frozen. `external_data`: True/False forces it,
    None (default) spills like ORT once the tensor bytes pass ~1.8 GiB. `optimizer`:
    `{group: {"step": int, "learning_rate": float, "states": {param: {"momentum0": array, ...}}}}`
    or `ParameterSet.optimizer_groups`. `properties`: int / float / str values (floats are
    stored as float32, as ORT does).
    """
    path = Path(path)
    check_destination(path)
    names = list(params)
    frozen_set = set(frozen)
    if trainable is not None:
        trainable_set = set(trainable)
        if trainable_set & frozen_set:
            raise OnnxportError(f"{path}: '{sorted(trainable_set & frozen_set)[0]}' is both trainable and frozen")
        frozen_set |= set(names) - trainable_set
        frozen_set |= trainable_set - set(names)  # reported as unknown just below
    unknown = sorted(frozen_set - set(names))
    if unknown:
        raise OnnxportError(f"{path}: '{unknown[0]}' is not one of the parameters being written")
    collecting = gc.isenabled()
    gc.disable()  # a few objects per tensor: with 100k tensors, collections cost more than the layout
    try:
        items = [_item(n, params[n], nominal) for n in names]
        groups = normalize_groups(optimizer, lambda n, v: _item(n, v, nominal))
        props = normalize_properties(properties)
        all_items = items + [m for g in groups for _, moments in g.states for m in moments]
        data_bytes = sum(i.nbytes for i in all_items)
        external = not nominal and (external_data if external_data is not None else data_bytes > AUTO_EXTERNAL_BYTES)
        if external:
            for i in all_items:
                i.external = i.strings is None and i.nbytes >= MIN_EXTERNAL_BYTES
        meta = _layout(path, items, frozen_set, groups, props, nominal, external)
    finally:
        if collecting:
            gc.enable()
    inline = [i for i in all_items if i.raw is not None and not i.external and not nominal]
    return write_files(path, meta, inline, [i for i in all_items if i.external], external, data_bytes,
                        Reporter(progress, cancel))


def _layout(path: Path, items: list[_Item], frozen: set[str], groups: list, props: list, nominal: bool,
            external: bool) -> bytes:
    """The metadata bytes; sets each item's raw_data position (in the file or `.data`)."""
    b = Builder(IDENTIFIER)
    root, state, train_vec, frozen_vec, groups_vec, bag = Ref(), Ref(), Ref(), Ref(), Ref(), Ref()
    root_fields = [(0, "i", VERSION), (1, "o", state)]
    if groups:
        root_fields.append((2, "o", groups_vec))
    if props:
        root_fields.append((3, "o", bag))
    b.table(root, root_fields)
    b.set_root(root)
    b.table(state, [(MS_REQUIRES_GRAD, "o", train_vec), (MS_FROZEN, "o", frozen_vec),
                    (MS_IS_NOMINAL, "B", int(nominal)), (MS_HAS_EXTERNAL, "B", int(external))])
    _tensor_list(b, train_vec, [i for i in items if i.name not in frozen], nominal)
    _tensor_list(b, frozen_vec, [i for i in items if i.name in frozen], nominal)
    if groups:
        build_groups(b, groups_vec, groups, lambda vec, tensors: _tensor_list(b, vec, tensors, nominal))
    if props:
        build_properties(b, bag, props)
    all_items = items + [m for g in groups for _, moments in g.states for m in moments]
    end = len(b.buf)
    for i in all_items:
        if i.raw is not None and not nominal:
            end += (-(end + 4)) % RAW_ALIGN
            i.raw.pos = end
            end += 4 + i.nbytes
    if end > INLINE_LIMIT:
        raise OnnxportError(f"{path}: {end / 2**30:.2f} GiB is over the 2 GiB limit of a checkpoint file; "
                            f"write it with external data")
    data_end = 0
    for i in all_items:
        if i.external:
            data_end += (-data_end) % (8 if i.itemsize == 8 else 4)
            struct.pack_into("<q", b.buf, i.offset_field, data_end)
            i.raw = Ref()
            i.raw.pos = data_end
            data_end += i.nbytes
    b.finish()
    return bytes(b.buf)
