"""Parameter files: safetensors and .npz (no torch needed), PyTorch state_dicts (torch)."""

from __future__ import annotations

import json
import struct

import numpy as np
import onnx
import pytest

from onnxport.core.io.kinds import SourceKind, sniff
from onnxport.core.io.param_files import read_npz, read_safetensors
from onnxport.core.io.readers import read_parameters
from onnxport.core.util.errors import CorruptFileError, OnnxportError

T = onnx.TensorProto


def span_bytes(tensor) -> bytes:
    with open(tensor.span.path, "rb") as f:
        f.seek(tensor.span.offset)
        return f.read(tensor.span.length)


def write_safetensors(path, tensors: dict[str, tuple[str, list[int], bytes]], metadata=None, pad: int = 0) -> None:
    """A safetensors file by the spec (8-byte header length, JSON header, data), no library."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode() + b" " * pad
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# ---- safetensors ------------------------------------------------------------------------------

def test_safetensors_zero_copy_with_spans(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    h = rng.standard_normal(5).astype(np.float16)
    ids = np.arange(6, dtype=np.int64).reshape(2, 3)
    bf16 = np.array([0x3F80, 0xC000, 0x0000], dtype=np.uint16)  # 1.0, -2.0, 0.0 as bfloat16 bits
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"w": ("F32", [3, 4], w.tobytes()), "h": ("F16", [5], h.tobytes()),
                             "ids": ("I64", [2, 3], ids.tobytes()), "b": ("BF16", [3], bf16.tobytes()),
                             "flag": ("BOOL", [], b"\x01")}, metadata={"format": "pt"}, pad=5)
    assert sniff(path) == SourceKind.SAFETENSORS
    params = read_parameters(path)
    assert params.kind == "safetensors" and params.properties == {"format": "pt"}
    assert {n: (p.elem_type, p.shape) for n, p in params.items()} == {
        "w": (T.FLOAT, (3, 4)), "h": (T.FLOAT16, (5,)), "ids": (T.INT64, (2, 3)), "b": (T.BFLOAT16, (3,)),
        "flag": (T.BOOL, ())}
    np.testing.assert_array_equal(params["w"].array(), w)
    np.testing.assert_array_equal(params["h"].array(), h)
    np.testing.assert_array_equal(params["ids"].array(), ids)
    np.testing.assert_array_equal(params["b"].array(), bf16)
    assert params["flag"].array().item() is True
    assert not params["w"].array().flags.owndata  # a view into the mapped file
    for name, values in {"w": w, "h": h, "ids": ids, "b": bf16}.items():
        assert span_bytes(params[name]) == values.tobytes()


def test_safetensors_written_by_the_library(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = {"enc.weight": np.arange(12, dtype=np.float32).reshape(3, 4), "enc.bias": np.ones(3, np.float32),
              "step": np.array([7], dtype=np.int32)}
    path = tmp_path / "lib.safetensors"
    st.save_file(arrays, str(path), metadata={"epoch": "3"})
    params = read_safetensors(path)
    assert params.properties == {"epoch": "3"}
    for name, values in arrays.items():
        np.testing.assert_array_equal(params[name].array(), values)
        assert span_bytes(params[name]) == values.tobytes()


@pytest.mark.parametrize("damage, message", [
    ("short", "too short"),
    ("header-length", "past the end"),
    ("not-json", "not JSON"),
    ("bad-dtype", "unsupported dtype"),
    ("size", "bytes for F32"),
    ("truncated", "truncated"),
])
def test_safetensors_damage_is_a_clear_error(tmp_path, damage, message):
    path = tmp_path / "bad.safetensors"
    good = np.ones(4, np.float32).tobytes()
    if damage == "short":
        path.write_bytes(b"\x01\x00")
    elif damage == "header-length":
        path.write_bytes(struct.pack("<Q", 10_000) + b"{}")
    elif damage == "not-json":
        path.write_bytes(struct.pack("<Q", 4) + b"{{{{")
    elif damage == "bad-dtype":
        write_safetensors(path, {"x": ("Q9", [4], good)})
    elif damage == "size":
        write_safetensors(path, {"x": ("F32", [5], good)})
    else:
        write_safetensors(path, {"x": ("F32", [4], good)})
        path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(CorruptFileError, match=message) as info:
        read_safetensors(path)
    assert str(path) in str(info.value)


# ---- npz ----------------------------------------------------------------------------------------

def test_npz_stored_entries_are_mapped_with_spans(tmp_path):
    rng = np.random.default_rng(1)
    plain = rng.standard_normal((4, 3)).astype(np.float32)
    fortran = np.asfortranarray(rng.standard_normal((2, 5)))
    big_endian = np.arange(4, dtype=">i4")
    path = tmp_path / "p.npz"
    np.savez(path, **{"fc.weight": plain, "f": fortran, "be": big_endian, "scalar": np.float32(2.5)})
    assert sniff(path) == SourceKind.NPZ
    params = read_parameters(path)
    assert params.kind == "npz"
    np.testing.assert_array_equal(params["fc.weight"].array(), plain)
    assert span_bytes(params["fc.weight"]) == plain.tobytes()
    assert not params["fc.weight"].array().flags.owndata
    np.testing.assert_array_equal(params["f"].array(), fortran)
    assert params["f"].span is None  # Fortran order: not raw C-order bytes
    np.testing.assert_array_equal(params["be"].array(), big_endian)
    assert params["be"].array().dtype == np.dtype("<i4") and params["be"].span is None
    assert params["scalar"].shape == () and params["scalar"].array() == np.float32(2.5)


def test_npz_compressed_entries_load_on_demand(tmp_path):
    values = np.linspace(0, 1, 30, dtype=np.float32).reshape(5, 6)
    path = tmp_path / "c.npz"
    np.savez_compressed(path, w=values)
    params = read_npz(path)
    assert params["w"].span is None and params["w"].shape == (5, 6)
    np.testing.assert_array_equal(params["w"].array(), values)


def test_npz_object_arrays_are_refused(tmp_path):
    path = tmp_path / "o.npz"
    np.savez(path, ok=np.ones(2), obj=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CorruptFileError, match="Python objects"):
        read_npz(path)


# ---- PyTorch state_dict -------------------------------------------------------------------------

@pytest.mark.torch
def test_state_dict_values_types_and_spans(tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    extra = {"half": torch.randn(3).half(), "bf": torch.tensor([1.0, -2.0]).bfloat16(),
             "view": torch.arange(10.0)[2:6]}  # a view into a bigger storage
    state = {**model.state_dict(), **extra}
    path = tmp_path / "sd.pt"
    torch.save(state, path)
    assert sniff(path) == SourceKind.TORCH_STATE_DICT
    params = read_parameters(path)
    assert params.kind == "state_dict" and list(params) == list(state)
    assert params["1.num_batches_tracked"].elem_type == T.INT64 and params["1.num_batches_tracked"].shape == ()
    assert params["half"].elem_type == T.FLOAT16 and params["bf"].elem_type == T.BFLOAT16
    np.testing.assert_array_equal(params["bf"].array(), np.array([0x3F80, 0xC000], np.uint16))
    for name, tensor in state.items():
        if tensor.dtype != torch.bfloat16:
            np.testing.assert_array_equal(params[name].array(), tensor.numpy(), err_msg=name)
        assert params[name].span is not None, name
        assert span_bytes(params[name]) == np.ascontiguousarray(params[name].array()).tobytes(), name


@pytest.mark.torch
def test_state_dict_inside_a_training_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(3, 2)
    path = tmp_path / "ckpt.pth"
    torch.save({"epoch": 4, "model_state_dict": model.state_dict(), "best": 0.5}, path)
    params = read_parameters(path)
    assert sorted(params) == ["bias", "weight"]
    np.testing.assert_array_equal(params["weight"].array(), model.weight.detach().numpy())


@pytest.mark.torch
def test_pickled_objects_are_refused_without_running_them(tmp_path):
    torch = pytest.importorskip("torch")
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.ones(2), "payload": _Payload(str(marker))}, path)
    with pytest.raises(OnnxportError, match="weights_only=True") as info:
        read_parameters(path)
    assert str(path) in str(info.value)
    assert not marker.exists()


class _Payload:
    """Unpickling this would create a file: proof that no pickle code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.torch
def test_legacy_torch_format_is_read_too(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "old.pt"
    torch.save({"w": torch.arange(4.0)}, path, _use_new_zipfile_serialization=False)
    from onnxport.core.io.param_files import read_state_dict

    params = read_state_dict(path)
    np.testing.assert_array_equal(params["w"].array(), np.arange(4.0, dtype=np.float32))
    assert params["w"].span is None


@pytest.mark.torch
def test_not_a_torch_file(tmp_path):
    pytest.importorskip("torch")
    from onnxport.core.io.param_files import read_state_dict

    path = tmp_path / "junk.pt"
    path.write_bytes(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(OnnxportError) as info:
        read_state_dict(path)
    assert str(path) in str(info.value)
