"""Parameter files from outside ONNX Runtime: PyTorch state_dicts, safetensors, numpy .npz.

Contract: `read_state_dict(path)`, `read_safetensors(path)`, `read_npz(path)` each return a lazy
`ParameterSet` (kind "state_dict" / "safetensors" / "npz"), registered in `sources.PARAM_READERS`.
- safetensors: memory-mapped, zero-copy views with `span`s naming the exact bytes (an export
  copies them file-to-file); no torch or safetensors package needed.
- .npz: uncompressed members memory-mapped the same way; compressed ones decompressed on demand;
  object arrays refused (`allow_pickle=False` always).
- .pt/.pth: only `torch.load(weights_only=True, mmap=True)`, which never runs a pickle's code;
  anything but tensors and plain containers is refused. Needs torch (the `onnxport[torch]`
  extra); this module imports without it.
Sizes are checked against the file before anything is allocated (`budgets`, `archive_bounds`,
`npz_reader`). Every problem raises `OnnxportError` with one line naming the file.
"""

from __future__ import annotations

import json
import mmap
import struct
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.io.archive_bounds import open_zip
from onnxport.core.io.mapped import map_file, view_loader
from onnxport.core.io.npz_reader import NpzMember, list_npz, read_member
from onnxport.core.io.parameter_set import FileSpan, ParameterSet, ParamTensor, c_contiguous
from onnxport.core.io.regular_files import regular_file
from onnxport.core.io.shape_limits import shape_problem
from onnxport.core.util.budgets import (
    SAFETENSORS_MAX_HEADER,
    SAFETENSORS_MAX_HEADER_TOKENS,
    TORCH_PICKLE_MAX,
    human_bytes,
)
from onnxport.core.util.errors import CorruptFileError, OnnxportError, UnavailableError, no_such_file
from onnxport.core.util.shapes import numel

T = onnx.TensorProto
TORCH_HINT = "needs torch: pip install 'onnxport[torch]'"

# safetensors dtype -> (ONNX element type, numpy dtype of the raw little-endian bytes)
SAFETENSORS_DTYPES: dict[str, tuple[int, str]] = {
    "F64": (T.DOUBLE, "<f8"), "F32": (T.FLOAT, "<f4"), "F16": (T.FLOAT16, "<f2"), "BF16": (T.BFLOAT16, "<u2"),
    "I64": (T.INT64, "<i8"), "I32": (T.INT32, "<i4"), "I16": (T.INT16, "<i2"), "I8": (T.INT8, "i1"),
    "U64": (T.UINT64, "<u8"), "U32": (T.UINT32, "<u4"), "U16": (T.UINT16, "<u2"), "U8": (T.UINT8, "u1"),
    "BOOL": (T.BOOL, "?"), "F8_E4M3": (T.FLOAT8E4M3FN, "u1"), "F8_E5M2": (T.FLOAT8E5M2, "u1"),
}



# --------------------------------------------------------------------------------------------
# safetensors


def read_safetensors(path: str | Path) -> ParameterSet:
    """Memory-map a .safetensors file: lazy zero-copy tensors with file spans."""
    path = Path(path)
    mm = map_file(path)
    size = len(mm)
    if size < 8:
        raise CorruptFileError(f"{path}: not a safetensors file (too short)")
    (header_len,) = struct.unpack_from("<Q", mm, 0)
    if header_len > min(SAFETENSORS_MAX_HEADER, size - 8):
        raise CorruptFileError(f"{path}: not a safetensors file (header length {header_len} past the end)")
    header = _safetensors_header(path, bytes(mm[8:8 + header_len]))
    base = 8 + header_len
    metadata = header.pop("__metadata__", None) or {}
    params: dict[str, ParamTensor] = {}
    for name, entry in header.items():
        params[name] = _safetensors_tensor(path, mm, base, size, name, entry)
    _refuse_overlaps(path, params)
    properties = {str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, dict) else {}
    return ParameterSet(params=params, sources=[path], kind="safetensors", properties=properties,
                        keepalive=[mm])


def _safetensors_header(path: Path, raw: bytes) -> dict:
    """The JSON header, its value count bounded before parsing (see budgets)."""
    tokens = sum(raw.count(c) for c in (b",", b":", b"[", b"{"))
    if tokens > SAFETENSORS_MAX_HEADER_TOKENS:
        raise CorruptFileError(f"{path}: safetensors header holds {tokens} JSON values, over onnxport's "
                               f"limit of {SAFETENSORS_MAX_HEADER_TOKENS}; refused")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CorruptFileError(f"{path}: not a safetensors file (header is not JSON)") from None
    if not isinstance(header, dict):
        raise CorruptFileError(f"{path}: not a safetensors file (header is not a JSON object)")
    return header


def _refuse_overlaps(path: Path, params: dict[str, ParamTensor]) -> None:
    """safetensors tensors never share bytes; many entries on one region would multiply an export."""
    spans = sorted((p.span.offset, p.span.offset + p.span.length, name) for name, p in params.items()
                   if p.span is not None and p.span.length)
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:]):
        if begin < end:
            raise CorruptFileError(f"{path}: tensor '{second}' overlaps tensor '{first}' "
                                   f"(safetensors tensors never share bytes)")


def _safetensors_tensor(path: Path, mm: mmap.mmap, base: int, size: int, name: str, entry) -> ParamTensor:
    where = f"{path}: tensor '{name}'"
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
        raise CorruptFileError(f"{where}: header entry lacks dtype/shape/data_offsets")
    dtype = entry["dtype"]
    if dtype not in SAFETENSORS_DTYPES:
        raise CorruptFileError(f"{where}: unsupported dtype {dtype!r}")
    shape, offsets = entry["shape"], entry["data_offsets"]
    if (not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape)  # JSON true is no dim
            or not isinstance(offsets, list) or len(offsets) != 2
            or not all(type(o) is int and o >= 0 for o in offsets)):
        raise CorruptFileError(f"{where}: malformed shape or data_offsets")
    elem_type, storage = SAFETENSORS_DTYPES[dtype]
    np_dtype = np.dtype(storage)
    shape_t = tuple(shape)
    problem = shape_problem(shape_t, np_dtype.itemsize)
    if problem:
        raise CorruptFileError(f"{where} {problem}")
    begin, end = offsets
    count = numel(shape_t)
    if end < begin or end - begin != count * np_dtype.itemsize:
        raise CorruptFileError(f"{where}: {end - begin} bytes for {dtype}{list(shape)}")
    if base + end > size:
        raise CorruptFileError(f"{where}: data past the end of the file (truncated?)")
    return ParamTensor(
        name=name, elem_type=elem_type, shape=shape_t,
        loader=view_loader(mm, where, np_dtype, base + begin, count, shape_t),
        source=str(path), span=FileSpan(path, base + begin, end - begin),
    )


# --------------------------------------------------------------------------------------------
# .npz


def read_npz(path: str | Path) -> ParameterSet:
    """Open a numpy .npz: stored entries memory-mapped with spans, compressed ones on demand."""
    path = Path(path)
    members = list_npz(path)  # headers checked against the file before anything is read
    mm = map_file(path)
    params = {m.name: _npz_param(path, m, mm) for m in members}
    return ParameterSet(params=params, sources=[path], kind="npz", keepalive=[mm])


def _npz_param(path: Path, member: NpzMember, mm: mmap.mmap) -> ParamTensor:
    where = f"{path}: array '{member.name}'"
    try:
        elem_type = onnx.helper.np_dtype_to_tensor_dtype(member.dtype.newbyteorder("="))
    except (KeyError, TypeError, ValueError):
        raise CorruptFileError(f"{where}: unsupported dtype {member.dtype}") from None
    if member.raw_little_c and member.data_offset is not None:
        loader = view_loader(mm, where, member.dtype.newbyteorder("<"), member.data_offset, member.count,
                             member.shape)
        span = FileSpan(path, member.data_offset, member.nbytes)
    else:
        loader, span = _npz_array_loader(path, member), None
    return ParamTensor(name=member.name, elem_type=elem_type, shape=member.shape, loader=loader,
                       source=str(path), span=span)


def _npz_array_loader(path: Path, member: NpzMember) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        array = c_contiguous(read_member(path, member))
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        return array

    return load


# --------------------------------------------------------------------------------------------
# PyTorch state_dict

STATE_DICT_KEYS = ("state_dict", "model_state_dict", "model", "module", "net", "weights")


def read_state_dict(path: str | Path) -> ParameterSet:
    """Load a PyTorch state_dict with `torch.load(weights_only=True)`; refuse anything else."""
    path = Path(path)
    regular_file(path)
    is_zip = zipfile.is_zipfile(path)
    if is_zip:
        _check_torch_zip(path)
    torch = _import_torch()
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=is_zip)
    except FileNotFoundError:
        raise no_such_file(path) from None
    except Exception as exc:  # UnpicklingError, RuntimeError... torch raises several kinds
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "weights only" in str(exc).lower() or "weights_only" in str(exc).lower():
            raise OnnxportError(
                f"{path}: holds Python objects besides tensors; onnxport loads .pt/.pth files only with "
                "torch.load(weights_only=True), which never runs a pickle's code",
                hint="save model.state_dict() (or use safetensors)") from None
        raise CorruptFileError(f"{path}: not a readable PyTorch file ({text})") from None
    tensors = _find_tensors(obj, torch)
    if not tensors:
        raise OnnxportError(f"{path}: holds no tensors (expected a state_dict: parameter name -> tensor)")
    spans = _torch_spans(path, tensors, torch) if is_zip else {}
    params: dict[str, ParamTensor] = {}
    for name, tensor in tensors.items():
        params[name] = _torch_param(path, name, tensor, torch, spans.get(name))
    return ParameterSet(params=params, sources=[path], kind="state_dict", keepalive=[tensors])


def _check_torch_zip(path: Path) -> None:
    """Declared sizes first: torch reads data.pkl whole (inflating it if compressed) and runs it
    through a pure-Python unpickler (slow), so its size is bounded too (see budgets)."""
    with open_zip(path, "PyTorch file") as zf:
        for info in zf.infolist():
            if info.filename.endswith("data.pkl") and info.file_size > TORCH_PICKLE_MAX:
                raise CorruptFileError(f"{path}: member '{info.filename}' is {human_bytes(info.file_size)}, over "
                                       f"onnxport's limit of {human_bytes(TORCH_PICKLE_MAX)} for a state_dict's pickle")


def _import_torch():
    try:
        import torch
    except ImportError:
        raise UnavailableError(f"reading PyTorch .pt/.pth files {TORCH_HINT}") from None
    return torch


def _find_tensors(obj, torch) -> dict[str, object]:
    """The state_dict inside what torch.load returned: the dict itself, a known key, or flattened."""
    if isinstance(obj, Mapping):
        if obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            return {str(k): v for k, v in obj.items()}
        for key in STATE_DICT_KEYS:
            inner = obj.get(key)
            if isinstance(inner, Mapping) and inner and all(isinstance(v, torch.Tensor) for v in inner.values()):
                return {str(k): v for k, v in inner.items()}
    found: dict[str, object] = {}

    def walk(value, prefix: str) -> None:
        if isinstance(value, torch.Tensor):
            found[prefix] = value
        elif isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))

    walk(obj, "")
    return found


_TORCH_TO_ONNX = {
    "float32": T.FLOAT, "float64": T.DOUBLE, "float16": T.FLOAT16, "bfloat16": T.BFLOAT16,
    "int64": T.INT64, "int32": T.INT32, "int16": T.INT16, "int8": T.INT8, "uint8": T.UINT8,
    "uint16": T.UINT16, "uint32": T.UINT32, "uint64": T.UINT64, "bool": T.BOOL,
    "float8_e4m3fn": T.FLOAT8E4M3FN, "float8_e5m2": T.FLOAT8E5M2,
    "complex64": T.COMPLEX64, "complex128": T.COMPLEX128,
}


def torch_dtype_to_onnx(dtype) -> int | None:
    """ONNX element type for a torch dtype (None if ONNX has none)."""
    return _TORCH_TO_ONNX.get(str(dtype).replace("torch.", ""))


def tensor_to_numpy(tensor, torch) -> np.ndarray:
    """A torch tensor as numpy (zero-copy when contiguous); bfloat16/float8 as same-width uints."""
    t = tensor.detach()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
        return t.contiguous().numpy().view(np.uint16)
    if str(t.dtype).startswith("torch.float8"):
        t = t.view(torch.uint8)
    return t.contiguous().numpy()


def _torch_param(path: Path, name: str, tensor, torch, span: FileSpan | None) -> ParamTensor:
    elem_type = torch_dtype_to_onnx(tensor.dtype)
    if elem_type is None:
        raise OnnxportError(f"{path}: tensor '{name}' has type {tensor.dtype}, which ONNX cannot hold")
    if tensor.is_sparse or tensor.is_quantized or tensor.device.type != "cpu":
        raise OnnxportError(f"{path}: tensor '{name}' is sparse/quantized; onnxport reads dense tensors only")
    return ParamTensor(name=name, elem_type=elem_type, shape=tuple(int(d) for d in tensor.shape),
                       loader=lambda: tensor_to_numpy(tensor, torch), source=str(path), span=span)


def _torch_spans(path: Path, tensors: dict[str, object], torch) -> dict[str, FileSpan]:
    """File spans of contiguous tensors in a torch zip archive loaded with mmap=True.

    torch.save stores each storage as an uncompressed entry `<archive>/data/<key>`; with mmap=True
    every storage is a window of one mapping of the file, so (storage pointer - entry offset) is
    the same for all. If anything does not line up, no spans (the loaders still work).
    """
    try:
        with zipfile.ZipFile(path) as zf:
            entries = {}
            with open(path, "rb") as f:
                for info in zf.infolist():
                    parts = info.filename.split("/")
                    if len(parts) >= 3 and parts[-2] == "data" and info.compress_type == zipfile.ZIP_STORED:
                        f.seek(info.header_offset)
                        head = f.read(30)
                        if head[:4] != b"PK\x03\x04":
                            return {}
                        name_len, extra_len = struct.unpack_from("<HH", head, 26)
                        entries[info.header_offset + 30 + name_len + extra_len] = info.file_size
        storages = {}
        for t in tensors.values():
            s = t.untyped_storage()
            storages[s.data_ptr()] = s.nbytes()
        if not entries or len(storages) != len(entries):
            return {}
        ptrs, offsets = sorted(storages), sorted(entries)
        base = ptrs[0] - offsets[0]
        if any(p - o != base or storages[p] != entries[o] for p, o in zip(ptrs, offsets)):
            return {}
        spans = {}
        for name, t in tensors.items():
            if t.is_contiguous():
                start = t.untyped_storage().data_ptr() - base + t.storage_offset() * t.element_size()
                spans[name] = FileSpan(path, start, t.numel() * t.element_size())
        return spans
    except (OSError, zipfile.BadZipFile, RuntimeError, struct.error):
        return {}


