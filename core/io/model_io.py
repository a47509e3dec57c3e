"""Reading ONNX models without materialising their weights.

`load_graph` loads the protobuf with external data left on disk, after checking every tensor's
references and sizes (external_data.py: nothing outside the model's folder, nothing declared
bigger than the file holds); `check_model_file` does only that check, for paths handed to ONNX
Runtime. `strip_weights` gives a copy whose large initializers keep their dims/type but carry no
bytes (for shape inference and previews).
"""

from __future__ import annotations

import functools
import mmap
import os
from pathlib import Path
from typing import NamedTuple

import onnx
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError

from onnxport.core.io.chunked_parse import parse_model
from onnxport.core.io.external_data import check_model_tensors, declared_nbytes
from onnxport.core.io.kinds import not_a_model
from onnxport.core.io.model_functions import check_function_calls
from onnxport.core.io.regular_files import regular_file
from onnxport.core.util.errors import CorruptFileError, OnnxportError, no_such_file

SMALL_TENSOR_BYTES = 4096  # initializers at most this big stay in stripped copies (shape constants)
MAPPED_PARSE_BYTES = 4 << 20  # model files bigger than this are parsed through a memory map


FIRST_IR_WITH_OPSETS = 3  # since IR 3 a model must import at least one opset


class FileIdentity(NamedTuple):
    """Which bytes a model was read from: the same identity, the same file content (a check
    made by another process on the same path stands for this read only if they match)."""

    device: int
    inode: int
    size: int
    mtime_ns: int


def load_graph(path: str | Path) -> onnx.ModelProto:
    """Load an ONNX model; external data stays on disk (tensors refer to it by location).

    Every tensor is checked (see external_data.py) before the model is returned: a file whose
    external data leaves its folder, or whose tensors declare more than they hold, is refused."""
    model, identity = read_graph(path)
    check_loaded(model, path, identity.size)
    return model


def read_graph(path: str | Path) -> tuple[onnx.ModelProto, FileIdentity]:
    """`load_graph` without `check_loaded` (the caller runs it, or has a child run it: see
    workflow/sources.py): the parsed model and the identity of the bytes it was parsed from."""
    path = Path(path)
    if not path.exists():
        raise no_such_file(path)
    if path.is_dir():
        raise OnnxportError(f"{path}: is a folder, expected an .onnx model file")
    regular_file(path)  # a named pipe would block open() for good
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            model = _parse_file(f, st.st_size, path)
    except (DecodeError, RuntimeError, ValueError, OSError) as exc:
        raise CorruptFileError(not_a_model(path) or
                               f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise CorruptFileError(not_a_model(path) or f"{path}: not an ONNX model (no graph)")
    if model.ir_version >= FIRST_IR_WITH_OPSETS and not model.opset_import:
        raise CorruptFileError(f"{path}: not a complete ONNX model (no opset imports; truncated?)")
    return model, FileIdentity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _parse_file(f, size: int, path: Path) -> onnx.ModelProto:
    """The model in the open file `f` of `size` bytes, parsed in slices (chunked_parse: a big graph
    never holds the GIL long); a big file through a memory map: protobuf's copy of the weights is
    the only one (a whole-file read copied them once more). Its size is
    checked before each slice: touching a mapping past the end of a file that shrank since it was
    mapped would kill the process (SIGBUS)."""
    if size <= MAPPED_PARSE_BYTES:
        return parse_model(f.read())
    fd = f.fileno()

    def unchanged() -> None:
        if os.fstat(fd).st_size < size:
            raise CorruptFileError(f"{path}: changed while it was read (it shrank)")

    try:
        data = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a file system that cannot map files: read it whole
        return parse_model(f.read())
    try:
        return parse_model(data, check=unchanged)
    finally:
        try:
            data.close()
        except BufferError:  # a slice still held by an exception's traceback: unmapped when it goes
            pass


def check_loaded(model: onnx.ModelProto, path: str | Path, file_bytes: int) -> None:
    """What `load_graph` checks once the file is parsed: every text field is UTF-8 and every
    tensor is sound (external_data.check_model_tensors), and local functions neither recurse nor
    expand past a bound (model_functions)."""
    check_text(model, path)
    check_model_tensors(model, path, file_bytes=file_bytes)
    check_function_calls(model, f"{path}: ")  # before anything inlines them or infers through them


def check_text(message, path: str | Path) -> None:
    """Refuse `message` (a model, or one of its tensors) if a string field in it is not UTF-8."""
    bad = non_utf8_text(message)
    if bad is not None:
        raise CorruptFileError(f"{path}: not a readable ONNX model (its {bad[0]} {bad[1][:60]!r} is not UTF-8 text)")


_TEXT_FIELDS: dict[object, int] = {}  # field descriptor -> 0 other, 1 string, 2 strings, 3 message, 4 messages
_TENSOR = onnx.TensorProto.DESCRIPTOR


def _field_kind(fd) -> int:
    base = {FieldDescriptor.TYPE_STRING: 1, FieldDescriptor.TYPE_MESSAGE: 3}.get(fd.type, 0)
    kind = _TEXT_FIELDS[fd] = base + 1 if base and is_repeated(fd) else base
    return kind


@functools.cache
def _tensor_text_fields() -> list[tuple[object, int]]:
    """(field, kind) of TensorProto's string and message fields."""
    return [(fd, kind) for fd in _TENSOR.fields if (kind := _field_kind(fd))]


def _set_fields(message) -> list:
    """(field, value) of `message`'s set fields, as `ListFields` gives them; of a TensorProto only
    its string and message fields, read one by one: `ListFields` would hand back its raw_data
    too, as a copy (upb makes a new object per field: a transient copy of the weights, in every
    check of a loaded model)."""
    if message.DESCRIPTOR is not _TENSOR:
        return message.ListFields()
    return [(fd, getattr(message, fd.name)) for fd, kind in _tensor_text_fields()
            if kind in (2, 4) or message.HasField(fd.name)]


def non_utf8_text(message) -> tuple[str, bytes] | None:
    """(field name, value) of the first string field that is not UTF-8, else None.

    protobuf hands such a proto2 `string` back as `bytes` instead of failing the parse, and every
    name would then break whatever compares or prints it. Walks the set fields only (tensor
    values are not strings and are not read)."""
    kinds = _TEXT_FIELDS
    for fd, value in _set_fields(message):
        kind = kinds.get(fd)
        if kind is None:
            kind = _field_kind(fd)
        if kind == 1 and type(value) is not str:
            return fd.name, value
        if kind == 2:
            for text in value:
                if type(text) is not str:
                    return fd.name, text
        elif kind == 3:
            bad = non_utf8_text(value)
            if bad is not None:
                return bad
        elif kind == 4:
            for item in value:
                bad = non_utf8_text(item)
                if bad is not None:
                    return bad
    return None


def check_model_file(path: str | Path) -> None:
    """Check a model file's tensors before a path is handed to a reader we do not control (ORT)."""
    load_graph(path)


def tensor_nbytes(t: onnx.TensorProto) -> int:
    """Bytes of a tensor's values, from dims and type (0 for strings)."""
    return declared_nbytes(t)


def strip_weights(model: onnx.ModelProto, keep_bytes: int = SMALL_TENSOR_BYTES) -> onnx.ModelProto:
    """A copy of `model` whose initializers over `keep_bytes` have no data (dims/type kept).

    The copy is for shape inference and for previews: it is small whatever the model's size.
    """
    stripped = copy_without_initializers(model)
    add_light_initializers(stripped, model.graph.initializer, keep_bytes)
    return stripped


def add_light_initializers(model: onnx.ModelProto, tensors, keep_bytes: int = SMALL_TENSOR_BYTES) -> None:
    """Append `tensors` to `model`'s initializers: those over `keep_bytes` (or external) as headers
    (name, type, dims, no data), the small ones (shape arguments...) whole."""
    for t in tensors:
        if tensor_nbytes(t) > keep_bytes or _is_external(t):
            header = model.graph.initializer.add()
            header.name, header.data_type = t.name, t.data_type
            header.dims.extend(t.dims)
            header.doc_string = t.doc_string
        else:
            model.graph.initializer.append(t)


def copy_without_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` with every field but `graph.initializer` (no weight bytes copied)."""
    return copy_model(model, initializers=False)


def copy_model(model: onnx.ModelProto, initializers: bool = True, graph: bool = True) -> onnx.ModelProto:
    """A copy of `model` made field by field, a long repeated field a slice at a time: one
    `CopyFrom` holds the GIL throughout, and a worker doing that
    freezes the app's window. `graph=False`: every field but the graph (a head to measure)."""
    result = onnx.ModelProto()
    for fd, value in model.ListFields():
        if fd.name != "graph":
            _copy_field(result, fd, value)
    for fd, value in model.graph.ListFields() if graph else ():
        if initializers or fd.name != "initializer":
            _copy_field(result.graph, fd, value)
    return result


def release(*containers: list | dict | set) -> None:
    """Empty long lists (of protobuf wrappers, say) a slice at a time, dicts and sets an item at a
    time: freeing one at once (a function's end) is one C call that holds the GIL throughout
    (a set of every name of a big graph); an item at a time lets the GUI thread in."""
    for items in containers:
        if isinstance(items, dict):
            while items:
                items.popitem()
        elif isinstance(items, set):
            while items:
                items.pop()
        else:
            while items:
                del items[-COPY_SLICE:]


def byte_size(message) -> int:
    """`message.ByteSize()` (its serialized size), its long repeated message fields summed item by
    item: upb serializes a message to measure it, holding the GIL throughout."""
    total = 0
    rest = type(message)()
    for fd, value in message.ListFields():
        if is_repeated(fd) and fd.message_type and len(value) > COPY_SLICE:
            tag = _varint_len(fd.number << 3 | 2)
            for item in value:
                size = item.ByteSize()
                total += tag + _varint_len(size) + size
        else:
            _copy_field(rest, fd, value)
    return total + rest.ByteSize()


def _varint_len(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def items_of(repeated) -> list:
    """A long protobuf repeated field as a list, a slice (one C call) at a time, for the reason
    `copy_model` gives (`list(graph.node)` is one C call holding the GIL)."""
    if len(repeated) <= COPY_SLICE:
        return list(repeated)
    found: list = []
    for start in range(0, len(repeated), COPY_SLICE):
        found.extend(repeated[start:start + COPY_SLICE])
    return found


def is_repeated(fd) -> bool:
    # protobuf >= 5 has `is_repeated`; older releases only `label`.
    return fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED


COPY_SLICE = 4096  # items per protobuf call when copying a long repeated field (nodes)


def extend_in_slices(field, items) -> None:
    """`field.extend(items)` (a protobuf repeated field, a sequence), one C call per slice of
    COPY_SLICE items, for the reason `copy_model` gives."""
    if len(items) <= COPY_SLICE:
        field.extend(items)
        return
    for start in range(0, len(items), COPY_SLICE):
        field.extend(items[start:start + COPY_SLICE])


def _copy_field(target, fd, value) -> None:
    if is_repeated(fd):
        extend_in_slices(getattr(target, fd.name), value)
    elif fd.message_type:
        getattr(target, fd.name).CopyFrom(value)
    else:
        setattr(target, fd.name, value)


def _is_external(t: onnx.TensorProto) -> bool:
    return t.data_location == onnx.TensorProto.EXTERNAL
