"""Read the older ONNX Runtime training checkpoint folder (`.pbseq` files), without copying.

Contract: `read_legacy_checkpoint(folder) -> ParameterSet` (kind "ort-checkpoint-legacy"). Before
the flatbuffer format (ORT 1.19 no longer loads these) ORT saved a folder of protobuf message
sequences: a varint32 count, then per message a varint32 length and a serialized `TensorProto`:
- `paramtrain_tensors.pbseq` / `paramfrozen_tensors.pbseq`: trainable / frozen parameters (the
  oldest layout had one `param_tensors.pbseq`, trainability unknown);
- `optim_<group>_<momentum>_tensors.pbseq`: that optimizer state of every parameter, by name;
- `optim_<group>_properties.pbseq`: `builtin.initial_learning_rate`, `builtin.step`;
- `custom_properties.pbseq`: user properties (scalar float / int64 / string tensors).
Every file must be a regular file inside the folder (`confined`). Files are memory-mapped; a
`raw_data` tensor is a zero-copy view with a `FileSpan`, typed fields are decoded. Every problem
raises `CorruptFileError` naming the file and, where relevant, the tensor.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from onnxport.core.io.confined import ConfinementError, confined_file
from onnxport.core.io.kinds import SourceKind
from onnxport.core.io.mapped import map_file, storage_dtype, view_loader
from onnxport.core.io.parameter_set import (
    FileSpan,
    OptimizerGroupState,
    ParameterSet,
    ParamTensor,
    dtype_name,
)
from onnxport.core.io.regular_files import regular_file
from onnxport.core.io.shape_limits import shape_problem
from onnxport.core.util.budgets import ENTRIES_MAX
from onnxport.core.util.errors import CorruptFileError

SUFFIX = ".pbseq"
PARAM_FILES = {"paramtrain": True, "paramfrozen": False}
OLDEST_PARAM_FILE = "param_tensors.pbseq"
LR_PROPERTY, STEP_PROPERTY = "builtin.initial_learning_rate", "builtin.step"
RECORDS_MAX = ENTRIES_MAX  # records all files of a folder may declare together (budgets)
_RAW_DATA_FIELD = 9
_LEN = 2  # protobuf wire type of length-delimited fields


def read_legacy_checkpoint(folder: str | Path) -> ParameterSet:
    """Read a legacy checkpoint folder (see the module docstring)."""
    folder = Path(folder)
    try:
        files = sorted(p for p in folder.iterdir() if p.name.endswith(SUFFIX) and not p.name.startswith("."))
    except OSError as exc:
        raise CorruptFileError(f"{folder}: cannot list the folder ({exc.strerror or exc})") from None
    files = [_confined(p, folder) for p in files]  # a symlink out of the folder is refused
    param_files = [(p, _trainability(p.name)) for p in files if _is_param_file(p.name)]
    if not param_files:
        raise CorruptFileError(f"{folder}: not a checkpoint folder (no paramtrain_tensors.pbseq / "
                               f"paramfrozen_tensors.pbseq in it)")
    keepalive: list[object] = []
    left = [RECORDS_MAX]  # records all the folder's files may declare
    params: dict[str, ParamTensor] = {}
    for path, trainable in param_files:
        for tensor in _tensors(path, trainable, keepalive, left):
            if tensor.name in params:
                raise CorruptFileError(f"{path}: parameter '{tensor.name}' appears twice")
            params[tensor.name] = tensor
    groups: dict[str, OptimizerGroupState] = {}
    for path in files:
        name = path.name
        if name.startswith("optim_") and name.endswith("_tensors" + SUFFIX):
            group_name, _, momentum = name[len("optim_"):-len("_tensors" + SUFFIX)].partition("_")
            group = groups.setdefault(group_name, OptimizerGroupState(group_name, 0, 0.0))
            for tensor in _tensors(path, None, keepalive, left):
                group.states.setdefault(tensor.name, {})[momentum] = tensor
        elif name.startswith("optim_") and name.endswith("_properties" + SUFFIX):
            group_name = name[len("optim_"):-len("_properties" + SUFFIX)]
            group = groups.setdefault(group_name, OptimizerGroupState(group_name, 0, 0.0))
            props = _properties(path, keepalive, left)
            group.step = int(props.get(STEP_PROPERTY, 0))
            group.initial_learning_rate = float(props.get(LR_PROPERTY, 0.0))
    properties: dict[str, int | float | str] = {}
    for path in files:
        if path.name.startswith("custom"):
            properties.update(_properties(path, keepalive, left))
    return ParameterSet(params, sources=[folder], kind=SourceKind.ORT_CHECKPOINT_LEGACY.value,
                        optimizer_groups=[groups[k] for k in sorted(groups)], properties=properties,
                        keepalive=keepalive)


def _confined(path: Path, folder: Path) -> Path:
    regular_file(path)  # a pipe or a device: named as such
    try:
        confined_file(path.name, folder, "checkpoint file")
    except ConfinementError as exc:
        raise CorruptFileError(f"{folder}: {exc}") from None
    return path


def _is_param_file(name: str) -> bool:
    return name == OLDEST_PARAM_FILE or any(name.startswith(prefix) for prefix in PARAM_FILES)


def _trainability(name: str) -> bool | None:
    return next((value for prefix, value in PARAM_FILES.items() if name.startswith(prefix)), None)


def _varint(data, pos: int, end: int, label: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise CorruptFileError(f"{label}: corrupt or truncated file (bad varint at offset {pos})")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _records(mm: mmap.mmap, label: str, left: list[int]):
    """Yield (offset, length) of each message of a message-sequence file; `left`: the records
    the folder's files may still declare (one budget for all of them)."""
    count, pos = _varint(mm, 0, len(mm), label)
    left[0] -= count
    if count > len(mm) - pos:  # each record takes at least its length byte
        raise CorruptFileError(f"{label}: declares {count:,} records, more than its {len(mm):,} bytes can hold")
    if left[0] < 0:
        raise CorruptFileError(f"{label}: declares {count:,} records; onnxport reads at most {RECORDS_MAX:,} "
                               f"in one folder")
    for _ in range(count):
        length, pos = _varint(mm, pos, len(mm), label)
        if pos + length > len(mm):
            raise CorruptFileError(f"{label}: truncated (a record runs past the end of the file)")
        yield pos, length
        pos += length


def _raw_data_field(data, start: int, end: int, label: str) -> tuple[int, int, int] | None:
    """(field start, data offset, data length) of the last `raw_data` field of a TensorProto."""
    found = None
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _varint(data, pos, end, label)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(data, pos, end, label)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == _LEN:
            length, pos = _varint(data, pos, end, label)
            if field == _RAW_DATA_FIELD:
                found = (field_start, pos, length)
            pos += length
        else:
            raise CorruptFileError(f"{label}: a tensor record is not a valid TensorProto")
        if pos > end:
            raise CorruptFileError(f"{label}: a tensor record is not a valid TensorProto (field past its end)")
    return found


def _parse(data: bytes, label: str) -> onnx.TensorProto:
    proto = onnx.TensorProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError):
        raise CorruptFileError(f"{label}: a tensor record is not a valid TensorProto") from None
    if proto.data_location == onnx.TensorProto.EXTERNAL:
        raise CorruptFileError(f"{label}: tensor '{proto.name}' points to external data, which legacy "
                               f"checkpoints never use")
    return proto


def _decode(proto: onnx.TensorProto, label: str) -> np.ndarray:
    try:
        return numpy_helper.to_array(proto)
    except Exception:  # onnx raises many types for inconsistent protos
        raise CorruptFileError(f"{label}: tensor '{proto.name}' has inconsistent data") from None


def _tensors(path: Path, trainable: bool | None, keepalive: list[object], left: list[int]) -> list[ParamTensor]:
    mm = map_file(path)
    keepalive.append(mm)
    label = str(path)
    tensors: dict[str, ParamTensor] = {}
    for pos, length in _records(mm, label, left):
        tensor = _tensor(mm, pos, length, path, label, trainable)
        if tensor.name in tensors:  # refused at once: 2M copies of one record took minutes
            raise CorruptFileError(f"{label}: tensor '{tensor.name[:120]}' appears twice")
        tensors[tensor.name] = tensor
    return list(tensors.values())


def _tensor(mm: mmap.mmap, pos: int, length: int, path: Path, label: str, trainable: bool | None) -> ParamTensor:
    end = pos + length
    raw = _raw_data_field(mm, pos, end, label)
    header = mm[pos:end] if raw is None else mm[pos:raw[0]] + mm[raw[1] + raw[2]:end]
    proto = _parse(header, label)
    if not proto.name:
        raise CorruptFileError(f"{label}: a tensor has no name")
    dims = tuple(int(d) for d in proto.dims)
    dtype = storage_dtype(proto.data_type)
    if dtype is None or any(d < 0 for d in dims):
        raise CorruptFileError(f"{label}: tensor '{proto.name}' has an unsupported type or bad shape "
                               f"({proto.data_type}, {list(dims)})")
    problem = shape_problem(dims, dtype.itemsize)
    if problem:
        raise CorruptFileError(f"{label}: tensor '{proto.name}' {problem}")
    numel = int(np.prod(dims, dtype=object)) if dims else 1
    if raw is None:  # typed fields (float_data, string_data...): small; decode them now
        values = _decode(_parse(mm[pos:end], label), label)
        if values.size != numel:
            raise CorruptFileError(f"{label}: tensor '{proto.name}' has {values.size} values for shape {list(dims)}")
        values.flags.writeable = False
        return ParamTensor(proto.name, proto.data_type, dims, lambda: values, source=label, trainable=trainable)
    nbytes = numel * dtype.itemsize
    if raw[2] != nbytes or dtype.kind == "O":
        raise CorruptFileError(f"{label}: tensor '{proto.name}' has {raw[2]} bytes of data, {nbytes} expected "
                               f"for {dtype_name(proto.data_type)}{list(dims)}")
    span = FileSpan(path, raw[1], nbytes)
    return ParamTensor(proto.name, proto.data_type, dims, view_loader(mm, label, dtype, raw[1], numel, dims),
                       source=label, trainable=trainable, span=span)


def _properties(path: Path, keepalive: list[object], left: list[int]) -> dict[str, int | float | str]:
    props: dict[str, int | float | str] = {}
    for tensor in _tensors(path, None, keepalive, left):
        values = tensor.array()
        if values.size != 1:
            raise CorruptFileError(f"{path}: property '{tensor.name}' is not a scalar")
        value = values.reshape(-1)[0]
        if isinstance(value, bytes):
            props[tensor.name] = value.decode("utf-8", errors="replace")
        elif isinstance(value, str):
            props[tensor.name] = value
        elif np.issubdtype(values.dtype, np.integer):
            props[tensor.name] = int(value)
        else:
            props[tensor.name] = float(value)
    return props
