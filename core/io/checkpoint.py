"""Read ONNX Runtime training checkpoints without the training package, without copying.

Contract: `read_checkpoint(path) -> ParameterSet` for
- the flatbuffer file (`save_checkpoint`, `generate_artifacts`): identifier `ODTC` at bytes 4..8,
  root `Checkpoint{version, module_state, optimizer_groups, property_bag}`; trainable vs frozen is
  which list a tensor is in; nominal checkpoints carry names and types only; with
  `has_external_data` a tensor whose `external_data_offset` is >= 0 has its bytes in
  `<checkpoint>.data`, a regular file inside the checkpoint's folder (`confined`);
- the older folder of `.pbseq` files (`checkpoint_legacy`); a `.pbseq` file means its folder.
Files are memory-mapped and kept alive by `ParameterSet.keepalive`: opening a multi-GB checkpoint
reads only its metadata. `ParamTensor.loader()` returns a read-only zero-copy view and
`ParamTensor.span` names the exact bytes, for file-to-file copies. Every problem raises
`OnnxportError` (usually `CorruptFileError`) with one line naming the file and, where relevant,
the tensor; no other exception type escapes.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.io.confined import ConfinementError, confined_file
from onnxport.core.io.flatbuf import FlatBuffer, Table
from onnxport.core.io.kinds import SourceKind
from onnxport.core.io.mapped import PACKED_4BIT, map_file, nominal_loader, storage_dtype, view_loader
from onnxport.core.io.parameter_set import (
    FileSpan,
    OptimizerGroupState,
    ParameterSet,
    ParamTensor,
    dtype_name,
)
from onnxport.core.io.shape_limits import shape_problem
from onnxport.core.util.errors import CorruptFileError, no_such_file

IDENTIFIER = b"ODTC"
SUPPORTED_VERSIONS = (1, 2)  # ORT 1.19 writes 2; version 1 files lack only the newer fields
DATA_SUFFIX = ".data"
STRING = onnx.TensorProto.STRING

# Field slots (schema order) of ort_training_checkpoint.fbs / ort.fbs.
CKPT_VERSION, CKPT_MODULE_STATE, CKPT_OPTIMIZER_GROUPS, CKPT_PROPERTY_BAG = range(4)
MS_REQUIRES_GRAD, MS_FROZEN, MS_IS_NOMINAL, MS_HAS_EXTERNAL = range(4)
T_NAME, T_DOC, T_DIMS, T_DATA_TYPE, T_RAW_DATA, T_STRING_DATA, T_EXTERNAL_OFFSET = range(7)
OG_NAME, OG_STEP, OG_LR, OG_STATES = range(4)
POS_PARAM_NAME, POS_MOMENTUMS = range(2)
PB_INTS, PB_FLOATS, PB_STRINGS = range(3)
PROP_NAME, PROP_VALUE = range(2)

# Bounds checks make these impossible; should one slip through, the user still gets one line.
# (The fuzz tests empty this tuple, so that a slip fails them.)
SAFETY_NET: tuple[type[Exception], ...] = (struct.error, IndexError, ValueError, OverflowError)


def read_checkpoint(path: str | Path) -> ParameterSet:
    """Read an ORT training checkpoint: flatbuffer file, legacy `.pbseq` folder or one of its files."""
    path = Path(path)
    try:
        if path.is_dir() or path.suffix == ".pbseq":
            from onnxport.core.io.checkpoint_legacy import read_legacy_checkpoint

            return read_legacy_checkpoint(path if path.is_dir() else path.parent)
        if not path.exists():
            raise no_such_file(path)
        return _Reader(path, map_file(path)).read()
    except SAFETY_NET as exc:
        raise CorruptFileError(f"{path}: corrupt checkpoint ({exc})") from None


class _Reader:
    def __init__(self, path: Path, mm: mmap.mmap) -> None:
        self.path = path
        self.label = str(path)
        self.mm = mm
        self.buf = FlatBuffer(memoryview(mm), self.label)
        self.keepalive: list[object] = [mm]
        self.nominal = False
        self.external = False
        self._data: tuple[Path, mmap.mmap] | None = None
        # Tensors never share bytes in a real checkpoint: all of them together fit in their file.
        # (Many tensors pointing at one region would multiply what an export writes.)
        self.declared = {"inline": 0, "external": 0}
        self.data_label = ""

    def read(self) -> ParameterSet:
        buf = self.buf
        if buf.identifier() != IDENTIFIER:
            owner = self.path.parent / self.path.name[: -len(DATA_SUFFIX)]
            hint = f"; it looks like the external data of {owner.name}: open that" if (
                self.path.name.endswith(DATA_SUFFIX) and len(self.path.name) > len(DATA_SUFFIX)
                and owner.is_file()) else ""
            raise CorruptFileError(f"{self.path}: not an ONNX Runtime training checkpoint "
                                   f"(no 'ODTC' identifier){hint}")
        root = buf.root()
        version = root.i32(CKPT_VERSION)
        if version not in SUPPORTED_VERSIONS:
            newer = " (newer than this onnxport understands)" if version > max(SUPPORTED_VERSIONS) else ""
            raise CorruptFileError(f"{self.path}: checkpoint format version {version} is not supported{newer}; "
                                   f"onnxport reads versions {', '.join(map(str, SUPPORTED_VERSIONS))}")
        params: dict[str, ParamTensor] = {}
        state = root.table(CKPT_MODULE_STATE)
        if state is not None:
            self.nominal = state.bool(MS_IS_NOMINAL)
            self.external = state.bool(MS_HAS_EXTERNAL)
            for slot, trainable in ((MS_REQUIRES_GRAD, True), (MS_FROZEN, False)):
                for table in state.tables(slot):
                    tensor = self.tensor(table, trainable)
                    if tensor.name in params:
                        raise CorruptFileError(f"{self.path}: parameter '{tensor.name}' appears twice")
                    params[tensor.name] = tensor
        groups = [self.group(g) for g in root.tables(CKPT_OPTIMIZER_GROUPS)]
        return ParameterSet(params, sources=[self.path], kind=SourceKind.ORT_CHECKPOINT.value, nominal=self.nominal,
                            version=version, optimizer_groups=groups, properties=self.properties(root),
                            keepalive=self.keepalive)

    def tensor(self, t: Table, trainable: bool | None, owner: str = "") -> ParamTensor:
        name = t.string(T_NAME)
        if not name:
            raise CorruptFileError(f"{self.path}: a tensor has no name")
        dims = t.int64s(T_DIMS)
        if dims and min(dims) < 0:
            raise self.bad(name, owner, f"has negative dimensions {list(dims)}")
        elem_type = t.i32(T_DATA_TYPE)
        dtype = storage_dtype(elem_type)
        if dtype is None:
            kind = PACKED_4BIT.get(elem_type)
            raise self.bad(name, owner, f"has the 4-bit type {kind}, which onnxport does not read yet" if kind
                           else f"has an unknown data type ({elem_type})")
        problem = shape_problem(dims, dtype.itemsize)
        if problem:
            raise self.bad(name, owner, problem)
        if self.nominal:
            return ParamTensor(name, elem_type, dims, nominal_loader(self.label, name), self.label, trainable)
        numel = 1
        for d in dims:
            numel *= d
        if elem_type == STRING:
            return self.string_tensor(t, name, owner, dims, numel, trainable)
        nbytes = numel * dtype.itemsize
        offset = t.i64(T_EXTERNAL_OFFSET, -1) if self.external else -1
        if offset >= 0:
            data_path, data_mm = self.data_file()
            if offset + nbytes > len(data_mm):
                raise self.bad(name, owner, "lies past the end of the file (truncated?)", data_path)
            self.count_bytes("external", nbytes, len(data_mm), name, owner, data_path)
            mm, span, label = data_mm, FileSpan(data_path, offset, nbytes), self.data_label
        else:
            start, length = t.vector(T_RAW_DATA, 1, "raw_data") or (0, -1)
            if length != nbytes:
                detail = "has no data" if length < 0 else f"has {length} bytes of data, {nbytes} expected"
                raise self.bad(name, owner, f"{detail} for {dtype_name(elem_type)}{list(dims)}")
            self.count_bytes("inline", nbytes, len(self.mm), name, owner, self.path)
            mm, span, label = self.mm, FileSpan(self.path, start, nbytes), self.label
        return ParamTensor(name, elem_type, dims, view_loader(mm, label, dtype, span.offset, numel, dims),
                           self.label, trainable, span)

    def count_bytes(self, where: str, nbytes: int, file_size: int, name: str, owner: str, file: Path) -> None:
        self.declared[where] += nbytes
        if self.declared[where] > file_size:
            raise self.bad(name, owner, f"shares its bytes with other tensors (together they declare "
                                        f"{self.declared[where]} bytes in a {file_size}-byte file)", file)

    def bad(self, name: str, owner: str, problem: str, file: Path | None = None) -> CorruptFileError:
        what = f"optimizer state '{name}' of '{owner}'" if owner else f"tensor '{name}'"
        return CorruptFileError(f"{file or self.path}: {what} {problem}")

    def string_tensor(self, t: Table, name: str, owner: str, dims: tuple[int, ...], numel: int,
                      trainable: bool | None) -> ParamTensor:
        raw = t.raw_strings(T_STRING_DATA)
        if len(raw) != numel:
            raise self.bad(name, owner, f"has {len(raw)} strings for shape {list(dims)}")
        values = np.empty(numel, dtype=object)
        for i, item in enumerate(raw):
            try:
                values[i] = item.decode("utf-8")
            except UnicodeDecodeError:
                values[i] = item
        values = values.reshape(dims)
        values.flags.writeable = False
        return ParamTensor(name, STRING, dims, lambda: values, source=self.label, trainable=trainable)

    def data_file(self) -> tuple[Path, mmap.mmap]:
        if self._data is None:
            data_path = self.path.with_name(self.path.name + DATA_SUFFIX)
            if not os.path.lexists(data_path):
                raise CorruptFileError(f"{self.path}: its external data file {data_path.name} is missing "
                                       f"(expected next to it: {data_path})")
            try:  # a symlink out of the folder is refused, as for a model's external data
                real, _ = confined_file(data_path.name, self.path.parent, "external data file")
            except ConfinementError as exc:
                raise CorruptFileError(f"{self.path}: {exc}") from None
            self._data = (data_path, map_file(real))
            self.data_label = str(data_path)
            self.keepalive.append(self._data[1])
        return self._data

    def group(self, g: Table) -> OptimizerGroupState:
        group = OptimizerGroupState(name=g.string(OG_NAME) or "", step=g.i64(OG_STEP),
                                    initial_learning_rate=g.f32(OG_LR))
        for state in g.tables(OG_STATES):
            param = state.string(POS_PARAM_NAME) or ""
            moments: dict[str, ParamTensor] = {}
            for i, table in enumerate(state.tables(POS_MOMENTUMS)):
                tensor = self.tensor(table, None, owner=param or "?")
                moments[tensor.name if tensor.name not in moments else f"momentum{i}"] = tensor
            group.states[param] = moments
        return group

    def properties(self, root: Table) -> dict[str, int | float | str]:
        bag = root.table(CKPT_PROPERTY_BAG)
        if bag is None:
            return {}
        props: dict[str, int | float | str] = {}
        for slot, value in ((PB_INTS, Table.i64), (PB_FLOATS, Table.f32), (PB_STRINGS, _string_value)):
            for p in bag.tables(slot):
                name = p.string(PROP_NAME) or ""
                if name in props:
                    raise CorruptFileError(f"{self.path}: property '{name[:120]}' appears twice")
                props[name] = value(p, PROP_VALUE)
        return props


def _string_value(table: Table, slot: int) -> str:
    return table.string(slot) or ""


