"""Read ONNX Runtime training checkpoints without the training package, without copying.

Two formats:
- the flatbuffer file (`CheckpointState.save_checkpoint`, `generate_artifacts`): identifier
  `ODTC`, root `Checkpoint{version, module_state, optimizer_groups, property_bag}`; trainable vs
  frozen is which list a tensor is in; nominal checkpoints carry names only; with
  `has_external_data` the bytes live in `<checkpoint>.data` at each tensor's offset;
- the older folder (`paramtrain_tensors.pbseq`, `paramfrozen_tensors.pbseq`): a varint32 count,
  then per tensor a varint32 length and a serialized `onnx.TensorProto`. ORT 1.19 cannot load
  these any more; onnxport can.
Files are memory-mapped; every tensor is a zero-copy view with a `FileSpan` for the writer.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from .errors import CheckpointMismatchError, CorruptFileError, NominalCheckpointError, OnnxportError
from .flatbuf import Buffer, Table
from .params import FileSpan, OptimizerGroupState, ParameterSet, ParamTensor, np_dtype_for
from .sources import PARAM_READERS, SourceKind

IDENTIFIER = b"ODTC"
NEWEST_VERSION = 2
LEGACY_FILES = {"paramtrain_tensors.pbseq": True, "paramfrozen_tensors.pbseq": False}


def _map(path: Path) -> mmap.mmap:
    try:
        with open(path, "rb") as f:
            if f.seek(0, 2) == 0:
                raise CorruptFileError(f"{path}: empty file")
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise OnnxportError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_checkpoint(path: str | Path) -> ParameterSet:
    """Read a checkpoint file (flatbuffer) or a legacy checkpoint folder (.pbseq)."""
    path = Path(path)
    if not path.exists():
        raise OnnxportError(f"{path}: no such file or folder")
    if path.is_dir():
        return read_legacy_checkpoint(path)
    mm = _map(path)
    buf = Buffer(memoryview(mm), path.name)
    if buf.size < 8 or bytes(buf.data[4:8]) != IDENTIFIER:
        raise CorruptFileError(f"{path}: not an ONNX Runtime training checkpoint (no 'ODTC' identifier)")
    root = buf.root()
    version = root.scalar(0, "i", 0)
    if not 1 <= version <= NEWEST_VERSION:
        raise CorruptFileError(f"{path}: checkpoint version {version} is not one onnxport reads "
                               f"(1..{NEWEST_VERSION})")
    state = root.table(1)
    if state is None:
        raise CorruptFileError(f"{path}: checkpoint has no module state (no parameters)")
    nominal = bool(state.scalar(2, "B", 0))
    external = bool(state.scalar(3, "B", 0))
    keepalive: list[object] = [mm]
    data = None
    if external and not nominal:
        data_path = path.with_name(path.name + ".data")
        if not data_path.is_file():
            raise CorruptFileError(f"{path}: its external data file {data_path.name} is missing")
        data_mm = _map(data_path)
        keepalive.append(data_mm)
        data = (data_path, memoryview(data_mm))
    params: dict[str, ParamTensor] = {}
    for slot, trainable in ((0, True), (1, False)):
        for table in state.tables(slot):
            tensor = _tensor(table, path, buf, data, nominal, trainable)
            if tensor.name in params:
                raise CorruptFileError(f"{path}: parameter '{tensor.name}' appears twice")
            params[tensor.name] = tensor
    groups = [_optimizer_group(g, path, buf, data, nominal) for g in root.tables(2)]
    return ParameterSet(params, sources=[path], kind="ort-checkpoint", nominal=nominal, version=version,
                        optimizer_groups=groups, properties=_properties(root.table(3)), keepalive=keepalive)


def _tensor(t: Table, path: Path, buf: Buffer, data, nominal: bool, trainable: bool | None) -> ParamTensor:
    name = t.string(0)
    if not name:
        raise CorruptFileError(f"{path}: a tensor has no name")
    dims_view, _ = t.array(2, "<i8")
    dims = tuple(int(d) for d in dims_view)
    elem_type = t.scalar(3, "i", 0)
    if any(d < 0 for d in dims):
        raise CorruptFileError(f"{path}: tensor '{name}' has negative dims {list(dims)}")
    try:
        dtype = np_dtype_for(elem_type).newbyteorder("<")
    except CheckpointMismatchError:
        raise CorruptFileError(f"{path}: tensor '{name}' has unknown data type {elem_type}") from None
    if elem_type in (onnx.TensorProto.UNDEFINED,):
        raise CorruptFileError(f"{path}: tensor '{name}' has no data type")
    numel = int(np.prod(dims, dtype=object)) if dims else 1
    source = path.name
    if nominal:
        return ParamTensor(name, elem_type, dims, _nominal_loader(name), source=source, trainable=trainable)
    if elem_type == onnx.TensorProto.STRING:
        values = np.array(t.strings(5), dtype=object)
        if values.size != numel:
            raise CorruptFileError(f"{path}: tensor '{name}' has {values.size} strings for shape {list(dims)}")
        return ParamTensor(name, elem_type, dims, lambda: values.reshape(dims), source=source, trainable=trainable)
    nbytes = numel * dtype.itemsize
    offset = t.scalar(6, "q", -1)
    if data is not None and offset >= 0:
        data_path, view = data
        if offset + nbytes > len(view):
            raise CorruptFileError(f"{data_path}: tensor '{name}' lies beyond the end of the file (truncated?)")
        span = FileSpan(data_path, offset, nbytes)
    else:
        raw, raw_offset = t.array(4, "u1")
        if raw.size != nbytes:
            raise CorruptFileError(f"{path}: tensor '{name}' has {raw.size} bytes of data, "
                                   f"{nbytes} expected for {dtype.name}{list(dims)}")
        view = buf.data
        span = FileSpan(path, raw_offset, nbytes)

    def load(view=view, offset=span.offset) -> np.ndarray:
        return np.frombuffer(view, dtype=dtype, count=numel, offset=offset).reshape(dims)

    return ParamTensor(name, elem_type, dims, load, source=source, trainable=trainable, span=span)


def _nominal_loader(name: str):
    def load() -> np.ndarray:
        raise NominalCheckpointError(f"tensor '{name}' comes from a nominal checkpoint: it has no values")
    return load


def _optimizer_group(g: Table, path: Path, buf: Buffer, data, nominal: bool) -> OptimizerGroupState:
    group = OptimizerGroupState(name=g.string(0) or "", step=g.scalar(1, "q", 0),
                                initial_learning_rate=g.scalar(2, "f", 0.0))
    for state in g.tables(3):
        param = state.string(0) or ""
        moments = {}
        for i, table in enumerate(state.tables(1)):
            tensor = _tensor(table, path, buf, data, nominal, None)
            key = tensor.name if tensor.name.startswith("momentum") else f"momentum{i}"
            moments[key] = tensor
        group.states[param] = moments
    return group


def _properties(bag: Table | None) -> dict[str, int | float | str]:
    if bag is None:
        return {}
    props: dict[str, int | float | str] = {}
    for p in bag.tables(0):
        props[p.string(0) or ""] = p.scalar(1, "q", 0)
    for p in bag.tables(1):
        props[p.string(0) or ""] = p.scalar(1, "f", 0.0)
    for p in bag.tables(2):
        props[p.string(0) or ""] = p.string(1) or ""
    return props


# ---- the older folder format --------------------------------------------------------------

def _varint(data: memoryview, pos: int, label: str) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise CorruptFileError(f"{label}: truncated or corrupt (bad varint)")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _raw_data_field(msg: memoryview, label: str) -> tuple[int, int, int] | None:
    """(field start, data offset, length) of `raw_data` (field 9) in a serialized TensorProto."""
    pos = 0
    while pos < len(msg):
        start = pos
        key, pos = _varint(msg, pos, label)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(msg, pos, label)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = _varint(msg, pos, label)
            if field == 9:
                if pos + length > len(msg):
                    raise CorruptFileError(f"{label}: corrupt tensor record")
                return start, pos, length
            pos += length
        else:
            raise CorruptFileError(f"{label}: corrupt tensor record")
    return None


def read_legacy_checkpoint(folder: Path) -> ParameterSet:
    """Read the pre-1.15 checkpoint folder of `.pbseq` tensor sequences."""
    files = [(folder / name, trainable) for name, trainable in LEGACY_FILES.items() if (folder / name).exists()]
    if not files:
        raise CorruptFileError(f"{folder}: no paramtrain_tensors.pbseq / paramfrozen_tensors.pbseq in this folder")
    params: dict[str, ParamTensor] = {}
    keepalive: list[object] = []
    for path, trainable in files:
        mm = _map(path)
        keepalive.append(mm)
        data = memoryview(mm)
        label = f"{folder.name}/{path.name}"
        count, pos = _varint(data, 0, label)
        for _ in range(count):
            length, pos = _varint(data, pos, label)
            if pos + length > len(data):
                raise CorruptFileError(f"{label}: truncated (a tensor record runs past the end)")
            tensor = _legacy_tensor(data, pos, length, path, label, trainable)
            if tensor.name in params:
                raise CorruptFileError(f"{label}: parameter '{tensor.name}' appears twice")
            params[tensor.name] = tensor
            pos += length
    return ParameterSet(params, sources=[folder], kind="ort-checkpoint-legacy", keepalive=keepalive)


def _legacy_tensor(data: memoryview, pos: int, length: int, path: Path, label: str,
                   trainable: bool) -> ParamTensor:
    msg = data[pos: pos + length]
    raw = _raw_data_field(msg, label)
    header = bytes(msg) if raw is None else bytes(msg[: raw[0]]) + bytes(msg[raw[1] + raw[2]:])
    proto = onnx.TensorProto()
    try:
        proto.ParseFromString(header)
    except DecodeError:
        raise CorruptFileError(f"{label}: a tensor record is not a valid TensorProto") from None
    if not proto.name:
        raise CorruptFileError(f"{label}: a tensor has no name")
    dims = tuple(int(d) for d in proto.dims)
    try:
        dtype = np_dtype_for(proto.data_type).newbyteorder("<")
    except CheckpointMismatchError:
        raise CorruptFileError(f"{label}: tensor '{proto.name}' has unknown data type {proto.data_type}") from None
    if raw is None:  # typed fields (float_data...): small tensors; decode them
        full = onnx.TensorProto()
        full.ParseFromString(bytes(msg))
        try:
            values = onnx.numpy_helper.to_array(full)
        except (ValueError, TypeError):
            raise CorruptFileError(f"{label}: tensor '{proto.name}' has inconsistent data") from None
        return ParamTensor(proto.name, proto.data_type, dims, lambda: values, source=label, trainable=trainable)
    numel = int(np.prod(dims, dtype=object)) if dims else 1
    if raw[2] != numel * dtype.itemsize:
        raise CorruptFileError(f"{label}: tensor '{proto.name}' has {raw[2]} bytes of data, "
                               f"{numel * dtype.itemsize} expected")
    offset = pos + raw[1]
    span = FileSpan(path, offset, raw[2])

    def load() -> np.ndarray:
        return np.frombuffer(data, dtype=dtype, count=numel, offset=offset).reshape(dims)

    return ParamTensor(proto.name, proto.data_type, dims, load, source=label, trainable=trainable, span=span)


PARAM_READERS[SourceKind.ORT_CHECKPOINT] = read_checkpoint
PARAM_READERS[SourceKind.ORT_CHECKPOINT_LEGACY] = read_checkpoint
