"""A model's graph without its big inline weights, read through a memory map.

Why: validation and the benchmark need a model's graph (inputs, outputs, ops, initializer types),
not its weights: ONNX Runtime reads those itself. `load_graph` copies every inline weight twice
(the file's bytes, then protobuf's copy), which dominated validating a big single-file model.

Contract: `load_light_graph(path, keep_bytes)` returns what `load_graph(path)` does without reading
the values it strips: every main-graph initializer whose inline raw_data exceeds `keep_bytes` is
its header (every field but raw_data), as `strip_weights` leaves it. The checks `load_graph` makes
hold: the rest passes `check_loaded`, and a stripped tensor's text is UTF-8 and its raw_data holds
exactly the bytes its dims and type declare (one that does not stays whole and is checked as
usual). A file the walk does not understand is loaded the usual way, then stripped.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from onnxport.core.io.chunked_parse import GRAPH_FIELD, LENGTH_DELIMITED, Unknown, fields, graph_slices
from onnxport.core.io.external_data import declared_nbytes, element_bits
from onnxport.core.io.model_io import (
    SMALL_TENSOR_BYTES,
    check_loaded,
    check_text,
    copy_without_initializers,
    load_graph,
)

INITIALIZER_FIELD = 5  # GraphProto.initializer
RAW_DATA_FIELD = 9  # TensorProto.raw_data


def load_light_graph(path: str | Path, keep_bytes: int = SMALL_TENSOR_BYTES) -> onnx.ModelProto:
    """See the module docstring."""
    path = Path(path)
    walked = _walk_file(path, keep_bytes) if path.is_file() else None  # else load_graph says what is wrong
    if walked is None:
        return _stripped(load_graph(path), keep_bytes)
    model, stripped, size = walked
    checkable = copy_without_initializers(model)
    headers = []
    for t in model.graph.initializer:
        (headers if t.name in stripped else checkable.graph.initializer).append(t)
    check_loaded(checkable, path, size)  # also refuses what read_graph refuses once parsed
    for t in headers:
        check_text(t, path)
    return model


def _walk_file(path: Path, keep_bytes: int) -> tuple[onnx.ModelProto, set[str], int] | None:
    """`_walk` over the file memory-mapped, and the file's size; None where the walk gives up."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if not size:
            return None
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        model, stripped = _walk(data, keep_bytes)
    except (Unknown, DecodeError, IndexError, ValueError):
        return None
    finally:
        data.close()
    return (model, stripped, size) if model.HasField("graph") else None


def _stripped(model: onnx.ModelProto, keep_bytes: int) -> onnx.ModelProto:
    """`model` (loaded whole) with its big inline initializers made headers, as the walk makes them."""
    for t in model.graph.initializer:
        if t.HasField("raw_data") and t.data_location != onnx.TensorProto.EXTERNAL and declared_nbytes(t) > keep_bytes:
            t.ClearField("raw_data")
    return model


def _walk(data, keep_bytes: int) -> tuple[onnx.ModelProto, set[str]]:
    """The model with its big inline initializers as headers, and their names."""
    model, stripped = onnx.ModelProto(), set()
    view = memoryview(data)
    try:
        for number, wire, start, value_start, end in fields(data, 0, len(data)):
            if number == GRAPH_FIELD and wire == LENGTH_DELIMITED:
                _walk_graph(model.graph, data, view, value_start, end, keep_bytes, stripped)
            else:
                model.MergeFromString(view[start:end])
    finally:
        view.release()
    return model, stripped


def _walk_graph(graph: onnx.GraphProto, data, view, start: int, end: int, keep_bytes: int,
                stripped: set[str]) -> None:
    """Merge the graph's fields in ~1 MB slices (chunked_parse), each big inline initializer as
    its header."""
    done = start
    for number, wire, field_start, value_start, field_end in fields(data, start, end):
        if number != INITIALIZER_FIELD or wire != LENGTH_DELIMITED or field_end - value_start <= keep_bytes:
            continue
        header = _header(data, view, value_start, field_end, keep_bytes)
        if header is None:
            continue
        for a, b in graph_slices(data, done, field_start):
            graph.MergeFromString(view[a:b])
        graph.initializer.append(header)
        stripped.add(header.name)
        done = field_end
    for a, b in graph_slices(data, done, end):
        graph.MergeFromString(view[a:b])


def _header(data, view, start: int, end: int, keep_bytes: int) -> onnx.TensorProto | None:
    """The tensor at `data[start:end]` without its raw_data, if it is one to strip: inline raw
    values of more than `keep_bytes`, exactly as many as its dims and type declare."""
    parts, raw, kept = [], [], 0
    for number, wire, field_start, value_start, field_end in fields(data, start, end):
        if number == RAW_DATA_FIELD and wire == LENGTH_DELIMITED:
            raw.append(field_end - value_start)
            continue
        kept += field_end - field_start
        if kept > keep_bytes:  # values in typed fields: not ours to strip
            return None
        parts.append(bytes(view[field_start:field_end]))
    if len(raw) != 1:
        return None
    header = onnx.TensorProto.FromString(b"".join(parts))
    if (header.data_location == onnx.TensorProto.EXTERNAL or len(header.external_data)
            or header.data_type == onnx.TensorProto.STRING or not element_bits(header.data_type)):
        return None
    declared = declared_nbytes(header)
    return header if declared == raw[0] and declared > keep_bytes else None
