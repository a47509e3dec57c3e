"""Trusting a model file's tensors: external data confined to the model's folder, sizes that fit.

Why: a crafted ONNX file can point its weights at `/etc/passwd`, climb out with `../` or a symlink,
or declare 2^62 elements backed by nothing; so every model is checked here once, on load.
Contract:
- `iter_tensors(model)` yields every tensor a model holds, labelled: initializers (sparse too),
  node attributes, If/Loop/Scan bodies at any depth, functions, training-info graphs.
- `external_reference(t, folder)`: where one tensor's external bytes are: resolved (symlinks
  followed) inside `folder`, a regular file, offset/length that fit in it, a length equal to what
  dims and type declare; anything else raises `CorruptFileError`.
- `check_model_tensors(model, model_path, file_bytes)`: known types, dims >= 0, external data as
  above, inline data no bigger than the file and holding what its dims declare, sparse tensors as
  ORT densifies them with their dense sizes bounded (`sparse_tensors`).
- `inline_nested_external(model, folder)` reads the external bytes of tensors other than
  main-graph initializers into their protos (the writer copies those as they are)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import onnx

from onnxport.core.io.confined import ConfinementError, confined_file
from onnxport.core.io.shape_limits import shape_problem
from onnxport.core.io.sparse_tensors import check_sparse_tensors
from onnxport.core.util.errors import CorruptFileError

_T = onnx.TensorProto
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
_SHOWN_CHARS = 120  # longest name or location quoted in a message
EXACT_RAW_CHECK_BYTES = 16 << 20  # inline raw_data up to this size is measured exactly (reading it copies it)


def _bits_table() -> dict[int, int]:
    """Bits per element of every numeric type this onnx knows (strings: 0)."""
    table = {_T.STRING: 0}
    sub_byte = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2}
    for name, value in _T.DataType.items():
        if name in sub_byte:
            table[value] = sub_byte[name]
        elif value not in (_T.UNDEFINED, _T.STRING):
            try:
                table[value] = 8 * onnx.helper.tensor_dtype_to_np_dtype(value).itemsize
            except (KeyError, ValueError, TypeError):
                continue
    return table


_BITS = _bits_table()
_COMPLEX = {_T.COMPLEX64, _T.COMPLEX128}


def element_bits(data_type: int) -> int | None:
    """Bits per element of an ONNX element type (strings: 0), None if this onnx does not know it."""
    return _BITS.get(data_type)


def declared_nbytes(t: _T) -> int:
    """Bytes of a tensor's values from dims and type (0 for strings and unknown types)."""
    bits = _BITS.get(t.data_type, 0)
    return (math.prod(t.dims) * bits + 7) // 8 if bits else 0


def _shown(text: str) -> str:
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


# --- walking every tensor ---------------------------------------------------------------------------
# Walks yield (tensor, is a main-graph initializer, where); `_label` turns `where` into words only
# when a message needs them (every tensor of a 100,000-tensor model is walked on each load).

def iter_tensors(model: onnx.ModelProto) -> Iterator[tuple[str, _T]]:
    """(label, tensor) for every tensor in `model`; the label names it for messages."""
    for t, _, where in _all_tensors(model):
        yield _label(t, where), t


def _all_tensors(model: onnx.ModelProto) -> Iterator[tuple[_T, bool, tuple]]:
    yield from _graph_tensors(model.graph, main=True)
    for fn in model.functions:
        yield from _nodes_tensors(fn.node)
    for info in model.training_info:
        yield from _graph_tensors(info.initialization, main=False)
        yield from _graph_tensors(info.algorithm, main=False)


_INITIALIZER = ("initializer", None)


def _graph_tensors(graph: onnx.GraphProto, main: bool) -> Iterator[tuple[_T, bool, tuple]]:
    for t in graph.initializer:
        yield t, main, _INITIALIZER
    for s in graph.sparse_initializer:
        yield s.values, False, ("sparse values", s.values)
        yield s.indices, False, ("sparse indices", s.values)
    yield from _nodes_tensors(graph.node)


def _nodes_tensors(nodes) -> Iterator[tuple[_T, bool, tuple]]:
    for node in nodes:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t, False, ("attribute", node, attr)
            for t in attr.tensors:
                yield t, False, ("attribute", node, attr)
            sparse = list(attr.sparse_tensors)
            if attr.HasField("sparse_tensor"):
                sparse.append(attr.sparse_tensor)
            for s in sparse:
                yield s.values, False, ("sparse values", s.values, node, attr)
                yield s.indices, False, ("sparse indices", s.values, node, attr)
            if attr.HasField("g"):
                yield from _graph_tensors(attr.g, main=False)
            for g in attr.graphs:
                yield from _graph_tensors(g, main=False)


def _label(t: _T, where: tuple) -> str:
    kind = where[0]
    if kind == "initializer":
        return f"tensor '{_shown(t.name)}'"
    if kind == "attribute":
        _, node, attr = where
        place = f"attribute '{_shown(attr.name)}' of node '{_shown(node.name or node.op_type)}'"
        return f"tensor '{_shown(t.name)}' ({place})" if t.name else place
    values = where[1]
    label = f"sparse tensor '{_shown(values.name)}' ({kind.split()[1]})"
    if len(where) == 4:
        label += f" (attribute '{_shown(where[3].name)}' of node '{_shown(where[2].name or where[2].op_type)}')"
    return label


def has_external(model: onnx.ModelProto) -> bool:
    return any(t.data_location == _T.EXTERNAL for t, _, _ in _all_tensors(model))


def external_locations(model: onnx.ModelProto) -> set[str]:
    """The external-data locations named anywhere in `model` (as written, not resolved)."""
    return {e.value for t, _, _ in _all_tensors(model) if t.data_location == _T.EXTERNAL
            for e in t.external_data if e.key == "location"}


# --- one tensor's external data ----------------------------------------------------------------------

@dataclass(frozen=True)
class ExternalRef:
    """Where one tensor's bytes are: a regular file inside the model's folder."""

    tensor: str
    location: str
    path: Path  # resolved (no symlinks), inside the folder
    offset: int
    length: int


class _Bad(Exception):
    """A check failed; the caller prefixes the tensor's label (built only then: labels cost time)."""


def _whole_number(info: dict[str, str], key: str, location: str) -> int | None:
    raw = info.get(key)
    if raw is None:
        return None
    if not _WHOLE_NUMBER.fullmatch(raw.strip()):
        raise _Bad(f"external data {key} '{_shown(raw)}' in '{_shown(location)}' is not a whole number")
    value = int(raw.strip())
    if value < 0:
        raise _Bad(f"external data {key} {value} in '{_shown(location)}' is negative")
    return value


def _confined_file(location: str, folder: Path) -> tuple[Path, int]:
    """The location as a real path inside `folder` (symlinks resolved) and its size (`confined`)."""
    try:
        path, st = confined_file(location, folder, "external data location", "external data file")
    except ConfinementError as exc:
        raise _Bad(str(exc)) from None
    return path, st.st_size


def _reference(t: _T, folder: Path, files: dict[str, tuple[Path, int]]) -> ExternalRef:
    info = {e.key: e.value for e in t.external_data}
    location = info.get("location", "")
    found = files.get(location)
    if found is None:
        found = files[location] = _confined_file(location, folder)
    path, size = found
    offset = _whole_number(info, "offset", location) or 0
    length = _whole_number(info, "length", location)
    if t.data_type == _T.STRING:
        raise _Bad("string tensors cannot hold external data")
    declared = declared_nbytes(t)
    if length is None:
        length = declared
    elif length != declared:
        raise _Bad(f"external data length {length} in '{_shown(location)}' does not match its dims "
                   f"{list(t.dims)} ({declared} bytes)")
    if offset > size or length > size - offset:
        raise _Bad(f"external data in '{_shown(location)}' (offset {offset}, {length} bytes) runs past the end "
                   f"of the file ({size} bytes)")
    return ExternalRef(t.name, location, path, offset, length)


def external_reference(t: _T, folder: Path, label: str | None = None) -> ExternalRef:
    """Validate one external tensor (see the module docstring); CorruptFileError names it by `label`."""
    try:
        return _reference(t, Path(folder), {})
    except _Bad as exc:
        raise CorruptFileError(f"{label or _label(t, _INITIALIZER)}: {exc}") from None


# --- the whole model --------------------------------------------------------------------------------

def _typed_fields() -> dict[int, str]:
    """The typed field each element type's values are read from (float16 from int32_data...)."""
    fields = {}
    for value in _BITS:
        try:
            fields[value] = onnx.helper.tensor_dtype_to_field(value)
        except (KeyError, ValueError, TypeError):
            continue
    return fields


_TYPED_FIELDS = _typed_fields()


def _typed_count(t: _T) -> int:
    """Values held in the field its type is read from: values in another field are not its data."""
    field = _TYPED_FIELDS.get(t.data_type)
    return len(getattr(t, field)) if field else 0


def _expected_typed_count(data_type: int, bits: int, n: int) -> int:
    if data_type in _COMPLEX:
        return 2 * n
    if 0 < bits < 8:
        per_int32 = 8 // bits  # ONNX packs sub-byte values into int32_data as it does into bytes
        return (n + per_int32 - 1) // per_int32
    return n


def _check(t: _T, folder: Path | None, file_bytes: int | None,
           files: dict[str, tuple[Path, int]]) -> ExternalRef | None:
    """Check one tensor; its external reference when it has one."""
    ref = None
    dims = t.dims
    if dims and min(dims) < 0:
        raise _Bad(f"negative dimension in dims {list(dims)}")
    data_type = t.data_type
    bits = _BITS.get(data_type)
    if bits is None:
        raise _Bad(f"unknown data type {data_type}")
    if t.data_location == _T.EXTERNAL:
        if folder is None:
            raise _Bad("refers to external data but the model has no folder")
        ref = _reference(t, folder, files)
    else:
        _check_inline(t, dims, bits, file_bytes)
    problem = shape_problem(dims, (bits + 7) // 8 or 8)  # holds no bytes, e.g. [0, 2**62]; strings: pointers
    if problem:
        raise _Bad(problem)
    return ref


def _check_inline(t: _T, dims, bits: int, file_bytes: int | None) -> None:
    n = math.prod(dims)
    if bits and t.HasField("raw_data"):
        declared = (n * bits + 7) // 8
        if file_bytes is not None and declared > file_bytes:
            raise _Bad(f"dims {list(dims)} declare {declared} bytes, more than the whole file holds "
                       f"({file_bytes} bytes)")
        if declared <= EXACT_RAW_CHECK_BYTES and len(t.raw_data) != declared:
            raise _Bad(f"dims {list(dims)} declare {declared} bytes but the tensor holds {len(t.raw_data)}")
        return
    held = _typed_count(t)
    if held != _expected_typed_count(t.data_type, bits, n):
        raise _Bad(f"dims {list(dims)} declare {n} values but the tensor holds {held}")
    if t.data_type == _T.STRING:  # ONNX strings are UTF-8; numpy_helper decodes them so
        for i, text in enumerate(t.string_data):
            try:
                text.decode("utf-8")
            except UnicodeDecodeError:
                raise _Bad(f"string {i} ({text[:40]!r}) is not UTF-8 text") from None


def check_model_tensors(model: onnx.ModelProto, model_path: str | Path | None,
                        file_bytes: int | None = None) -> None:
    """Check every tensor of `model` (loaded from `model_path`); raise CorruptFileError naming the file,
    the tensor and the location. `file_bytes`: the model file's size (bounds inline tensors)."""
    folder = Path(model_path).parent if model_path is not None else None
    prefix = f"{model_path}: " if model_path is not None else ""
    files: dict[str, tuple[Path, int]] = {}
    spans: list[tuple[Path, int, int, _T, tuple]] = []
    for t, _, where in _all_tensors(model):
        try:
            ref = _check(t, folder, file_bytes, files)
        except _Bad as exc:
            raise CorruptFileError(f"{prefix}{_label(t, where)}: {exc}") from None
        if ref is not None and ref.length:
            spans.append((ref.path, ref.offset, ref.offset + ref.length, t, where))
    _refuse_overlaps(prefix, spans)
    check_sparse_tensors(model, prefix, file_bytes, folder)  # dense sizes, ORT's rules


def _refuse_overlaps(prefix: str, spans: list[tuple[Path, int, int, _T, tuple]]) -> None:
    """Two tensors never share external bytes: exporters write each tensor once, and many tensors on
    one region would multiply what an export writes (a small file claiming terabytes)."""
    spans.sort(key=lambda s: (str(s[0]), s[1], s[2]))
    for a, b in zip(spans, spans[1:]):
        if a[0] == b[0] and b[1] < a[2]:
            raise CorruptFileError(f"{prefix}{_label(b[3], b[4])}: its external data (offset {b[1]}) overlaps "
                                   f"that of {_label(a[3], a[4])} in '{_shown(a[0].name)}'; tensors never share bytes")


def read_external(ref: ExternalRef) -> bytes:
    """The bytes of a checked reference (a private copy)."""
    with open(ref.path, "rb", buffering=0) as f:
        f.seek(ref.offset)
        data = f.read(ref.length)
    if len(data) != ref.length:
        raise CorruptFileError(f"{ref.path}: truncated: {ref.length} bytes expected at offset {ref.offset}")
    return data


def inline_nested_external(model: onnx.ModelProto, folder: Path) -> int:
    """Load the external bytes of every tensor except main-graph initializers into its proto.

    Returns how many tensors were inlined. Their references are checked first (confined, bounded).
    """
    count = 0
    for t, main, where in list(_all_tensors(model)):
        if main or t.data_location != _T.EXTERNAL:
            continue
        data = read_external(external_reference(t, folder, _label(t, where)))
        del t.external_data[:]
        t.data_location = _T.DEFAULT
        t.raw_data = data
        count += 1
    return count
