"""Structure-aware generators for the reader fuzz tests: whole files built from fuzzed parts.

Byte mutations rarely produce a well-formed header that lies; these do:
- `safetensors_file`: a JSON header of fuzzed entries (dtype, shape, data_offsets, odd JSON
  values), a fuzzed or exact length field, and data bytes that fit the entries or not;
- `npz_file`: zip members holding .npy headers with fuzzed descr / fortran_order / shape (huge,
  negative, odd), format versions, stored or deflated, data that fits or not;
- `onnx_edits` + `apply_onnx_edits`: field edits of a real model (dims, data types, raw/typed
  data, external data locations/offsets/lengths - escaping paths and symlinks included -, graph
  input types, opsets, node op types and inputs).
"""

from __future__ import annotations

import io
import json
import struct
import warnings
import zipfile

import onnx
from hypothesis import strategies as st
from onnx import TensorProto as T

from onnxport.core.io.external_data import iter_tensors

BIG_INTS = (0, 1, 2, 3, 4, 8, 12, -1, 1 << 31, 1 << 32, 1 << 53, (1 << 63) - 1, 1 << 63, 1 << 64, 10 ** 30)
JSON_INT = st.one_of(st.sampled_from(BIG_INTS), st.integers(-4, 64))
JSON_ODD = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3), st.just([]),
                     st.just({}), st.lists(st.booleans(), max_size=2))

# --- safetensors ------------------------------------------------------------------------------

ST_DTYPES = st.sampled_from(["F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64",
                             "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "C64", "f32", ""])
ST_ENTRY = st.one_of(
    st.fixed_dictionaries({"dtype": ST_DTYPES, "shape": st.one_of(st.lists(JSON_INT, max_size=4), JSON_ODD),
                           "data_offsets": st.one_of(st.lists(JSON_INT, min_size=2, max_size=2),
                                                     st.lists(JSON_INT, max_size=3), JSON_ODD)}),
    JSON_ODD)
ST_HEADER = st.dictionaries(st.one_of(st.text(max_size=4), st.just("__metadata__")), ST_ENTRY, max_size=4)
ST_METADATA = st.one_of(st.dictionaries(st.text(max_size=3), st.one_of(st.text(max_size=3), JSON_INT), max_size=2),
                        JSON_ODD)


@st.composite
def safetensors_file(draw) -> bytes:
    header = draw(ST_HEADER)
    if draw(st.booleans()):
        header["__metadata__"] = draw(ST_METADATA)
    text = json.dumps(header).encode() if not draw(st.integers(0, 15)) == 0 else b"[" * 100_000
    ends = [e["data_offsets"][1] for e in header.values() if isinstance(e, dict) and isinstance(
        e.get("data_offsets"), list) and len(e["data_offsets"]) == 2 and isinstance(e["data_offsets"][1], int)]
    fit = max([e for e in ends if 0 <= e <= 4096], default=0)
    data = bytes(fit) if draw(st.booleans()) else draw(st.binary(max_size=64))
    length = len(text) if draw(st.integers(0, 3)) else draw(st.sampled_from(BIG_INTS + (len(text) + 1,)))
    return struct.pack("<Q", length % (1 << 64)) + text + data


# --- .npz -------------------------------------------------------------------------------------

NPY_DESCR = st.one_of(
    st.sampled_from(["<f4", ">f8", "|b1", "<i8", "|u1", "<c8", "<f2", "|i1", ">u2", "f4", "<f16", "|O", "<U3", "|S2",
                     "<M8[s]", "<m8[D]", "|V8", "garbage", "", "(2,)<f4"]),
    st.just([("a", "<f4"), ("b", "<i8")]), st.just([("x", "<f4", (2,))]), JSON_INT)
NPY_SHAPE = st.one_of(st.lists(JSON_INT, max_size=4).map(tuple), st.sampled_from([(), None, "3", [2, 2], (2.0,)]))


@st.composite
def npy_member(draw) -> bytes:
    descr, shape = draw(NPY_DESCR), draw(NPY_SHAPE)
    fortran = draw(st.sampled_from([False, True, 1, "yes"]))
    text = repr({"descr": descr, "fortran_order": fortran, "shape": shape})
    if draw(st.integers(0, 7)) == 0:
        text = draw(st.sampled_from(["{", "(" * 300 + ")" * 300, "{'descr': '<f4'}", "[1, 2]", "__import__('os')"]))
    major = draw(st.sampled_from([1, 1, 2, 3, 0, 9]))
    length_fmt = "<H" if major == 1 else "<I"
    pad = (-(6 + 2 + struct.calcsize(length_fmt) + len(text) + 1)) % 64
    body = (text + " " * pad + "\n").encode("utf-8", "replace")
    head = b"\x93NUMPY" + bytes([major, 0]) + struct.pack(length_fmt, len(body)) + body
    data = draw(st.one_of(st.binary(max_size=96), st.integers(0, 4096).map(bytes)))
    return head + data


@st.composite
def npz_file(draw) -> bytes:
    out = io.BytesIO()
    names = draw(st.lists(st.sampled_from(["w.npy", "n.npy", "dir/x.npy", "../e.npy", ".npy", "noext", "w.npy"]),
                          min_size=1, max_size=3))
    with zipfile.ZipFile(out, "w") as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are meant
        for name in names:
            method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
            zf.writestr(zipfile.ZipInfo(name), draw(npy_member()), compress_type=method)
    return out.getvalue()


# --- ONNX -------------------------------------------------------------------------------------

DIMS = st.lists(st.one_of(st.sampled_from([0, 1, 2, 3, 4, 12, 1 << 31, 1 << 40, (1 << 63) - 1, -1, -(1 << 63)]),
                          st.integers(0, 6)), max_size=4)
DATA_TYPES = st.one_of(st.integers(-1, 27), st.sampled_from([999, (1 << 31) - 1]))
LOCATIONS = st.sampled_from(["weights.bin", "./weights.bin", "../weights.bin", "sub/../weights.bin", "sub/inner.bin",
                             "/etc/hostname", "C:/x", "\\\\srv\\x", "", "a\x00b", ".", "sub", "missing.bin",
                             "link_out", "link_in", "loop", "x" * 300, "weights.bin/", "model.onnx"])
NUMBER_TEXT = st.one_of(st.none(), st.sampled_from(["0", "4", "8", "12", "48", "-1", "-0", "+4", " 8", "8 ", "1e3",
                                                    "0x10", "9" * 30, "\u0663", "4.0", "", "abc"]),
                        st.integers(-5, 1 << 70).map(str))
TYPED = st.sampled_from(["float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"])
TENSOR_EDIT = st.one_of(
    st.tuples(st.just("dims"), DIMS), st.tuples(st.just("data_type"), DATA_TYPES),
    st.tuples(st.just("raw_data"), st.binary(max_size=64)), st.tuples(st.just("typed"), TYPED, st.integers(0, 20)),
    st.tuples(st.just("external"), LOCATIONS, NUMBER_TEXT, NUMBER_TEXT), st.tuples(st.just("location"), st.booleans()))
GRAPH_EDIT = st.one_of(
    st.tuples(st.just("param_input"), st.integers(0, 8), DATA_TYPES, DIMS),
    st.tuples(st.just("input_type"), DATA_TYPES, DIMS),
    st.tuples(st.just("opset"), st.sampled_from(["", "ai.onnx.ml", "com.x"]),
              st.sampled_from([-1, 0, 1, 7, 17, 23, 10 ** 6])),
    st.tuples(st.just("ir"), st.sampled_from([-1, 0, 1, 3, 8, 11, 99])),
    st.tuples(st.just("op"), st.integers(0, 8), st.sampled_from(["Add", "Foo", "If", "Loop", "Constant", "Reshape", ""])),
    st.tuples(st.just("io"), st.integers(0, 8), st.sampled_from(["", "nope", "x", "y", "h", "W"]), st.booleans()))
INDEX_ROWS = st.one_of(st.lists(st.integers(-3, 12), max_size=4).map(lambda r: [r]),  # linear positions
                       st.lists(st.lists(st.integers(-1, 6), min_size=1, max_size=3), max_size=3))  # coordinates
SPARSE_EDIT = st.one_of(  # the seed's sparse initializer: its dense shape, indices and values
    st.tuples(st.just("sparse_dims"), DIMS),
    st.tuples(st.just("sparse_indices"), st.sampled_from([T.INT64, T.INT32, T.INT8, T.UINT8, T.FLOAT]), INDEX_ROWS),
    st.tuples(st.just("sparse_values"), st.integers(0, 5), st.sampled_from([T.FLOAT, T.INT64, T.STRING, T.INT4,
                                                                            T.FLOAT16]), st.booleans()))
ONNX_EDITS = st.lists(st.one_of(st.tuples(st.just("tensor"), st.integers(0, 16), TENSOR_EDIT), GRAPH_EDIT, SPARSE_EDIT),
                      min_size=1, max_size=3)


def _edit_sparse(s: onnx.SparseTensorProto, edit) -> None:
    kind = edit[0]
    if kind == "sparse_dims":
        del s.dims[:]
        s.dims.extend(edit[1])
    elif kind == "sparse_indices":
        rows = edit[2] if len(edit[2]) != 1 else [[v] for v in edit[2][0]]  # one row: linear, [nnz]
        width = len(rows[0]) if rows else 1
        flat = [r[i] if i < len(r) else 0 for r in rows for i in range(width)]
        if edit[1] == T.UINT8:
            flat = [v & 0xFF for v in flat]
        name = s.indices.name
        s.indices.CopyFrom(onnx.helper.make_tensor(name, edit[1], [len(rows)] if width == 1 else [len(rows), width],
                                                   [float(v) for v in flat] if edit[1] == T.FLOAT else flat))
    else:
        _, nnz, data_type, rank2 = edit
        values = [b"v"] * nnz if data_type == T.STRING else [1] * nnz
        dims = [1, nnz] if rank2 else [nnz]
        s.values.CopyFrom(onnx.helper.make_tensor(s.values.name, data_type, dims, values))


def _edit_tensor(t: onnx.TensorProto, edit) -> None:
    kind = edit[0]
    if kind == "dims":
        del t.dims[:]
        t.dims.extend(edit[1])
    elif kind == "data_type":
        t.data_type = edit[1]
    elif kind == "raw_data":
        t.raw_data = edit[1]
    elif kind == "typed":
        field = getattr(t, edit[1])
        del field[:]
        field.extend([b"s"] * edit[2] if edit[1] == "string_data" else [1] * edit[2])
    elif kind == "external":
        t.data_location = T.EXTERNAL
        del t.external_data[:]
        for key, value in (("location", edit[1]), ("offset", edit[2]), ("length", edit[3])):
            if value is not None:
                t.external_data.add(key=key, value=value)
    else:
        t.data_location = T.EXTERNAL if edit[1] else T.DEFAULT


def apply_onnx_edits(data: bytes, edits) -> bytes:
    model = onnx.ModelProto.FromString(data)
    graph = model.graph
    for edit in edits:
        kind = edit[0]
        if kind == "tensor":
            tensors = [t for _, t in iter_tensors(model)]
            _edit_tensor(tensors[edit[1] % len(tensors)], edit[2])
        elif kind == "param_input":
            inits = list(graph.initializer)
            vi = graph.input.add()
            vi.name = inits[edit[1] % len(inits)].name if inits else "W"
            vi.type.tensor_type.elem_type = edit[2]
            for d in edit[3]:
                vi.type.tensor_type.shape.dim.add().dim_value = d
        elif kind == "input_type" and graph.input:
            tt = graph.input[0].type.tensor_type
            tt.elem_type = edit[1]
            tt.shape.Clear()
            for d in edit[2]:
                tt.shape.dim.add().dim_value = d
        elif kind == "opset":
            model.opset_import.add(domain=edit[1], version=edit[2])
        elif kind == "ir":
            model.ir_version = edit[1]
        elif kind == "op" and graph.node:
            graph.node[edit[1] % len(graph.node)].op_type = edit[2]
        elif kind.startswith("sparse_") and graph.sparse_initializer:
            _edit_sparse(graph.sparse_initializer[0], edit)
        elif kind == "io" and graph.node:
            node = graph.node[edit[1] % len(graph.node)]
            (node.output if edit[3] else node.input).append(edit[2])
    return model.SerializeToString()
