"""Regressions: the smallest crafted input of each reader bug the fuzz tests (test_fuzz_readers) found,
and of the memory bombs found while fixing them. Each must end in one OnnxportError line that names
the file, or (index, sniff) in a plain result; the memory bombs run under RLIMIT_AS.
"""

from __future__ import annotations

import struct
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.graph.index import build_index
from onnxport.core.io import checkpoint as C
from onnxport.core.io.checkpoint import read_checkpoint
from onnxport.core.io.flatbuf import FlatBuffer
from onnxport.core.io.kinds import SourceKind, sniff
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.param_files import read_npz, read_safetensors
from onnxport.core.pytorch.pt2_check import check_pt2_archive
from onnxport.core.util.errors import OnnxportError
from tests.support.checkpoint_writer import write_checkpoint

from ..crafted_files import deflated_zeros, npy_header, run_bounded, stored, write_safetensors_raw, write_zip
from ..fuzz_seeds import onnx_model, pbseq

HUGE = 1 << 62


def _refused(call, path, match: str):
    with pytest.raises(OnnxportError, match=match) as info:
        call(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


# --- .npz ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, match", [((-1, 4), "negative dimensions"), ((0, HUGE), "too big for any array"),
                                          ((1,) * 65, "65 dimensions")])
def test_npy_header_shapes_no_array_can_have(tmp_path, shape, match):
    path = write_zip(tmp_path / "p.npz", [stored("w.npy", npy_header(shape) + bytes(64))])
    _refused(read_npz, path, match)


def test_npy_header_that_numpy_cannot_tokenize(tmp_path):
    header = b"\x93NUMPY\x01\x00" + struct.pack("<H", 54) + b"{" + b" " * 52 + b"\n"
    path = write_zip(tmp_path / "p.npz", [stored("w.npy", header)])
    _refused(read_npz, path, r"'w': not a readable .npy header")


def test_corrupt_deflate_stream_in_an_npz(tmp_path):
    np.savez_compressed(tmp_path / "p.npz", w=np.arange(1000, dtype=np.float32))
    with zipfile.ZipFile(tmp_path / "p.npz") as zf:
        info = zf.infolist()[0]
    data = bytearray((tmp_path / "p.npz").read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 40:start + 80] = bytes(b ^ 0xFF for b in data[start + 40:start + 80])
    (tmp_path / "p.npz").write_bytes(bytes(data))
    _refused(lambda p: read_npz(p)["w"].array(), tmp_path / "p.npz", "'w': not a readable .npy entry .*decompressing")


# --- safetensors --------------------------------------------------------------------------------

@pytest.mark.parametrize("entries, match", [
    ({"w": {"dtype": "F32", "shape": [0, HUGE], "data_offsets": [0, 0]}}, "too big for any array"),
    ({"w": {"dtype": "F32", "shape": [True, 2], "data_offsets": [0, 8]}}, "malformed shape"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, "'b' overlaps tensor 'a'"),
])
def test_safetensors_headers_no_file_can_hold(tmp_path, entries, match):
    import json

    path = write_safetensors_raw(tmp_path / "p.safetensors", json.dumps(entries).encode(), bytes(8))
    _refused(read_safetensors, path, match)


# --- ORT checkpoints ----------------------------------------------------------------------------

def _tensor_table(buf: FlatBuffer, name: str):
    state = buf.root().table(C.CKPT_MODULE_STATE)
    return next(t for slot in (C.MS_REQUIRES_GRAD, C.MS_FROZEN) for t in state.tables(slot) if t.string(C.T_NAME) == name)


def test_checkpoint_tensor_with_a_zero_dim_and_a_huge_one(tmp_path):
    path = write_checkpoint(tmp_path / "ckpt", {"w": np.zeros((0, 4), np.float32)})
    data = bytearray(path.read_bytes())
    dims, _ = _tensor_table(FlatBuffer(bytes(data), "x"), "w").vector(C.T_DIMS, 8)
    struct.pack_into("<q", data, dims + 8, HUGE)
    path.write_bytes(bytes(data))
    _refused(read_checkpoint, path, "tensor 'w' has dimensions .* too big for any array")


def test_legacy_tensor_with_a_zero_dim_and_a_huge_one(tmp_path):
    t = numpy_helper.from_array(np.zeros((0, 4), np.float32), "w")
    t.dims[1] = HUGE
    (tmp_path / "paramtrain_tensors.pbseq").write_bytes(pbseq([t]))
    _refused(read_checkpoint, tmp_path, "tensor 'w' has dimensions .* too big for any array")


def test_checkpoint_tensors_sharing_one_raw_data(tmp_path):
    """Ten tensors on the bytes of one: together they declare more than the file holds."""
    arrays = {"t0": np.ones(64, np.float32)} | {f"t{i}": np.zeros(0, np.float32) for i in range(1, 10)}
    path = write_checkpoint(tmp_path / "ckpt", arrays)
    data = bytearray(path.read_bytes())
    buf = FlatBuffer(bytes(data), "x")
    shared = buf.deref(_tensor_table(buf, "t0").field(C.T_RAW_DATA), "raw")
    for i in range(1, 10):
        table = _tensor_table(buf, f"t{i}")
        struct.pack_into("<q", data, table.vector(C.T_DIMS, 8)[0], 64)
        at = table.field(C.T_RAW_DATA)
        struct.pack_into("<I", data, at, shared - at)
    path.write_bytes(bytes(data))
    _refused(read_checkpoint, path, "shares its bytes with other tensors")


SHARED_STRINGS = """
import struct, sys
import numpy as np
from pathlib import Path
from onnxport.core.io import checkpoint as C
from tests.support.checkpoint_writer import write_checkpoint
from onnxport.core.util.errors import CorruptFileError
from onnxport.core.io.flatbuf import FlatBuffer
path = Path(sys.argv[1])
write_checkpoint(path, {"w": np.ones(2, np.float32)}, properties={f"p{i}": "v" for i in range(3000)})
data = bytearray(path.read_bytes())
data += bytes(-len(data) % 4)
big = len(data)
data += struct.pack("<I", 1 << 20) + b"x" * (1 << 20) + b"\\0"  # one 1 MiB string...
for p in FlatBuffer(bytes(data), "x").root().table(C.CKPT_PROPERTY_BAG).tables(C.PB_STRINGS):
    at = p.field(C.PROP_VALUE)
    struct.pack_into("<I", data, at, big - at)  # ... the value of 3000 properties: 3 GiB of copies
path.write_bytes(bytes(data))
try:
    C.read_checkpoint(path)
except CorruptFileError as exc:
    print(exc)
"""


def test_one_long_string_shared_by_thousands_of_fields(tmp_path):
    path = tmp_path / "ckpt"
    done = run_bounded(SHARED_STRINGS, limit_gb=1.5, args=["-c", SHARED_STRINGS, str(path)])
    assert done.returncode == 0, done.stderr[-2000:]
    assert path.stat().st_size < 2 << 20
    assert "strings are shared by so many fields" in done.stdout and str(path) in done.stdout


# --- .pt2 and sniffing --------------------------------------------------------------------------

def _zip_with_raw_name(path, raw_name: bytes):
    """A zip whose member name is `raw_name` (flagged UTF-8, whatever its bytes)."""
    write_zip(path, [stored("N" * len(raw_name), b"{}")], flag_bits=0x800)
    path.write_bytes(path.read_bytes().replace(b"N" * len(raw_name), raw_name))
    return path


def test_pt2_member_name_that_is_not_utf8(tmp_path):
    import torch

    path = _zip_with_raw_name(tmp_path / "m.pt2", b"m/\xff\xfe.json")
    _refused(lambda p: check_pt2_archive(p, torch), path, "not a readable .pt2 archive")


def test_pt2_member_with_an_empty_name(tmp_path):
    import torch

    path = write_zip(tmp_path / "m.pt2", [stored("", b"{}")])
    check_pt2_archive(path, torch)  # JSON-like bytes under no name: nothing torch would unpickle


def test_sniffing_a_zip_whose_member_name_is_not_utf8(tmp_path):
    assert sniff(_zip_with_raw_name(tmp_path / "p.npz", b"\xff.npy")) == SourceKind.UNKNOWN


PT2_BOMB = """
import sys, torch
from pathlib import Path
from onnxport.core.util.errors import OnnxportError
from onnxport.core.pytorch.pt2_check import check_pt2_archive
try:
    check_pt2_archive(Path(sys.argv[1]), torch)
except OnnxportError as exc:
    print(exc)
"""


def test_pt2_sample_inputs_that_inflate_to_gigabytes(tmp_path):
    path = write_zip(tmp_path / "m.pt2", [deflated_zeros("m/data/sample_inputs/model.pt", b"PK", 3 << 30)])
    done = run_bounded(PT2_BOMB, limit_gb=2.0, args=["-c", PT2_BOMB, str(path)])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "zip bomb" in done.stdout


SPECIAL_FILES = """
import os, sys
from pathlib import Path
from onnxport.core.io.checkpoint import read_checkpoint
from onnxport.core.util.errors import OnnxportError
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.readers import read_parameters
from onnxport.core.workflow.sources import classify_sources
folder = Path(sys.argv[1])
os.mkfifo(folder / "paramtrain_tensors.pbseq")
os.mkfifo(folder / "model.onnx")
(folder / "dangling.onnx").symlink_to(folder / "nowhere")
for call in (lambda: read_checkpoint(folder), lambda: load_graph(folder / "model.onnx"),
             lambda: read_parameters(folder / "model.onnx")):
    try:
        call()
    except OnnxportError as exc:
        print(exc)
(folder / "paramtrain_tensors.pbseq").unlink()
found = classify_sources([folder])
print((found.model, found.params, found.others))  # the folder opens: the pipe and the dangling link are skipped
"""


def test_named_pipes_are_refused_or_skipped_never_opened(tmp_path):
    done = run_bounded(SPECIAL_FILES, args=["-c", SPECIAL_FILES, str(tmp_path)])
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == f"{tmp_path / 'paramtrain_tensors.pbseq'}: is a named pipe, not a file onnxport can read"
    assert lines[1] == lines[2] == f"{tmp_path / 'model.onnx'}: is a named pipe, not a file onnxport can read"
    assert lines[3] == "(None, [], [])"


# --- ONNX ---------------------------------------------------------------------------------------

def _save(model: onnx.ModelProto, path):
    onnx.save_model(model, path)
    return path


def test_onnx_name_that_is_not_utf8(tmp_path):
    data = onnx_model().SerializeToString().replace(b"/enc/MatMul", b"/enc/\xffatMul")
    (tmp_path / "m.onnx").write_bytes(data)
    _refused(load_graph, tmp_path / "m.onnx", r"its name b'/enc/\\xffatMul' is not UTF-8 text")


def test_onnx_tensor_name_or_external_data_key_that_is_not_utf8(tmp_path):
    data = onnx_model().SerializeToString().replace(b"labels", b"l\xffbels")  # an initializer's name
    (tmp_path / "m.onnx").write_bytes(data)
    _refused(load_graph, tmp_path / "m.onnx", r"its name b'l\\xffbels' is not UTF-8 text")
    model = onnx_model()
    w = next(t for t in model.graph.initializer if t.name == "W")
    w.data_location = T.EXTERNAL
    w.external_data.add(key="location", value="w.bin")
    data = model.SerializeToString().replace(b"location", b"locati\xffn")
    (tmp_path / "e.onnx").write_bytes(data)
    _refused(load_graph, tmp_path / "e.onnx", r"its key b'locati\\xffn' is not UTF-8 text")


def test_the_text_check_reads_no_tensor_values():
    """upb's ListFields hands a tensor's raw_data back as a copy; the check must not ask for it."""
    import tracemalloc

    from onnxport.core.io.model_io import non_utf8_text

    model = onnx_model()
    model.graph.initializer.append(numpy_helper.from_array(np.ones(16 << 20, np.float32), "big"))  # 64 MB
    tracemalloc.start()
    try:
        assert non_utf8_text(model) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


def test_onnx_typed_values_in_the_field_of_another_type(tmp_path):
    model = onnx_model()
    b = next(t for t in model.graph.initializer if t.name == "b")  # float16: its values are in int32_data
    b.data_type = T.FLOAT  # read from float_data, which is empty
    _refused(load_graph, _save(model, tmp_path / "m.onnx"), "tensor 'b': dims .3. declare 3 values but the tensor holds 0")


def test_onnx_string_tensor_that_is_not_utf8(tmp_path):
    model = onnx_model()
    next(t for t in model.graph.initializer if t.name == "labels").string_data[0] = b"\x80at"
    _refused(load_graph, _save(model, tmp_path / "m.onnx"), r"tensor 'labels': string 0 .* is not UTF-8 text")


@pytest.mark.parametrize("external", [False, True])
def test_onnx_tensor_with_a_zero_dim_and_a_huge_one(tmp_path, external):
    model = onnx_model()
    w = next(t for t in model.graph.initializer if t.name == "W")
    w.dims[:] = [0, HUGE]
    w.raw_data = b""
    if external:
        (tmp_path / "w.bin").write_bytes(b"")
        w.data_location = T.EXTERNAL
        w.external_data.add(key="location", value="w.bin")
    _refused(load_graph, _save(model, tmp_path / "m.onnx"), "tensor 'W': has dimensions .* too big for any array")


def test_index_of_a_parameter_input_with_an_unknown_type(tmp_path):
    model = onnx_model()
    model.graph.input.append(helper.make_tensor_value_info("W", T.FLOAT, [4, 3]))
    model.graph.input[-1].type.tensor_type.elem_type = 999
    index = build_index(load_graph(_save(model, tmp_path / "m.onnx")))
    assert index["W"].nbytes is None and index["W"].dtype == "type999"
