"""Crafted archives and headers end in one clear line, before anything is allocated from them.

Each reader call below only reads headers; a missing guard would return a lazy ParameterSet and
the test would fail without allocating. The end-to-end CLI test runs under RLIMIT_AS.
"""

from __future__ import annotations

import json
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.io.npz_reader import list_npz, read_member
from onnxport.core.io.param_files import read_npz, read_safetensors
from onnxport.core.util.budgets import (
    ARCHIVE_TOTAL_FLOOR,
    INFLATE_FLOOR,
    SAFETENSORS_MAX_HEADER_TOKENS,
    TORCH_PICKLE_MAX,
    MiB,
)
from onnxport.core.util.errors import CorruptFileError, OnnxportError

from ..crafted_files import (
    deflated_zeros,
    npy_header,
    npz_bomb,
    run_bounded,
    stored,
    write_safetensors_raw,
    write_zip,
)
from ..model_builders import forward_mlp


def test_npz_bomb_is_refused_from_its_headers(tmp_path):
    path = npz_bomb(tmp_path / "bomb.npz", gib=4)
    assert path.stat().st_size < 5 * MiB
    with pytest.raises(CorruptFileError, match=r"'w.npy' declares 4.0 GiB uncompressed .* zip bomb .*np.savez") as info:
        read_npz(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_npz_bomb_through_embed_is_one_line_exit_2(tmp_path):
    graph = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [1]),
                               helper.make_tensor_value_info("w", T.FLOAT, [1 << 30])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1 << 30])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "g.onnx")
    npz_bomb(tmp_path / "bomb.npz", gib=4)
    code = ("import sys; from onnxport.core.cli import run; "
            "sys.argv = ['onnxport', 'embed', 'g.onnx', 'bomb.npz', '-o', 'out.onnx', '-q']; run()")
    done = run_bounded(code, limit_gb=2.0, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "zip bomb" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.npz", "g.onnx"]


def test_npy_header_claiming_4_tib_is_one_line(tmp_path):
    head = npy_header((1 << 40,))
    path = write_zip(tmp_path / "tib.npz", [deflated_zeros("w.npy", head, 16)])
    with pytest.raises(CorruptFileError, match=r"header declares float32\[1099511627776\] \(4.0 TiB\) but the "
                                               r"archive holds 16 bytes"):
        read_npz(path)
    stored_path = write_zip(tmp_path / "tib_stored.npz", [stored("w.npy", head + bytes(16))])
    with pytest.raises(CorruptFileError, match="4.0 TiB"):
        read_npz(stored_path)


def test_zip_member_declaring_4_tib_is_refused(tmp_path):
    head = npy_header((1 << 40,))
    path = write_zip(tmp_path / "tib.npz", [deflated_zeros("w.npy", head, 16, declared=len(head) + (4 << 40))])
    with pytest.raises(CorruptFileError, match="declares 4.0 TiB uncompressed"):
        read_npz(path)


def test_members_within_the_floor_each_are_bounded_in_total(tmp_path):
    per = INFLATE_FLOOR // 2  # each member alone is allowed
    count = ARCHIVE_TOTAL_FLOOR // per + 1
    members = [deflated_zeros(f"w{i}.npy", npy_header((per // 4,)), per) for i in range(count)]
    path = write_zip(tmp_path / "many.npz", members)
    with pytest.raises(CorruptFileError, match=r"members declare .* in all .* zip bomb"):
        read_npz(path)


@pytest.mark.parametrize("damage, message", [
    ("stored-size-lie", "stored uncompressed but declares"),
    ("past-end", "ends past the end of the file"),
    ("encrypted", "is encrypted"),
    ("structured", "unsupported dtype"),
])
def test_lying_archives_are_one_line(tmp_path, damage, message):
    data = npy_header((4,)) + np.ones(4, np.float32).tobytes()
    path = tmp_path / "bad.npz"
    if damage == "stored-size-lie":
        write_zip(path, [stored("w.npy", data, declared=1 << 40)])
    elif damage == "past-end":
        write_zip(path, [stored("w.npy", data)])
        raw = bytearray(path.read_bytes())
        at = raw.index(b"PK\x01\x02")  # central directory: make the member claim 1 TiB stored
        cextra = raw.index(b"\x01\x00\x18\x00", at)
        raw[cextra + 4:cextra + 20] = (1 << 40).to_bytes(8, "little") * 2
        path.write_bytes(bytes(raw))
    elif damage == "encrypted":
        write_zip(path, [stored("w.npy", data)], flag_bits=0x1)
    else:
        write_zip(path, [stored("w.npy", npy_header((2,), [('a', '<f4'), ('b', '<f4')]) + bytes(16))])
    with pytest.raises(CorruptFileError, match=message) as info:
        read_npz(path)
    assert str(path) in str(info.value)


def test_legit_archives_still_read_through_one_reader(tmp_path):
    """Compressed zeros under the floor, Fortran order and big-endian members: same values as numpy."""
    arrays = {"zeros": np.zeros(1 << 20, np.float32), "f": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
              "be": np.arange(5, dtype=">i4"), "scalar": np.float32(1.5)}
    path = tmp_path / "ok.npz"
    np.savez_compressed(path, **arrays)
    members = {m.name: m for m in list_npz(path)}
    for name, want in arrays.items():
        got = read_member(path, members[name])
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.asarray(want).dtype and got.shape == np.shape(want)
    params = read_npz(path)
    assert params["be"].array().dtype == np.dtype("<i4") and params["scalar"].array().shape == ()


def test_feeds_use_the_same_bounded_reader(tmp_path):
    specs = input_specs(forward_mlp())  # input: float32 [batch, 8]
    path = write_zip(tmp_path / "inputs.npz", [deflated_zeros("input.npy", npy_header((1 << 28, 8)), 8 << 30)])
    with pytest.raises(OnnxportError, match="inputs.npz: member 'input.npy' declares 8.0 GiB"):
        open_feeds(path, specs)
    head = npy_header((1 << 40, 8))
    lying = write_zip(tmp_path / "lying.npz", [deflated_zeros("input.npy", head, 64)])
    with pytest.raises(OnnxportError, match="lying.npz: array 'input': its header declares"):
        open_feeds(lying, specs)


# ---- safetensors --------------------------------------------------------------------------------

@pytest.mark.parametrize("offsets", [[0, 4 << 30], [1 << 40, (1 << 40) + 16], [16, 8]])
def test_safetensors_offsets_past_the_end_or_backwards(tmp_path, offsets):
    count = (offsets[1] - offsets[0]) // 4 if offsets[1] > offsets[0] else 4
    header = json.dumps({"w": {"dtype": "F32", "shape": [count], "data_offsets": offsets}}).encode()
    path = write_safetensors_raw(tmp_path / "w.safetensors", header, bytes(16))
    with pytest.raises(CorruptFileError, match=r"tensor 'w': (data past the end|-?\d+ bytes for F32)") as info:
        read_safetensors(path)
    assert str(path) in str(info.value)


def test_safetensors_header_with_too_many_values_is_refused_before_parsing(tmp_path):
    values = b"1," * SAFETENSORS_MAX_HEADER_TOKENS
    header = b'{"__metadata__":{"a":[' + values + b'1]}}'
    path = write_safetensors_raw(tmp_path / "h.safetensors", header)
    with pytest.raises(CorruptFileError, match="JSON values, over onnxport's limit"):
        read_safetensors(path)


def test_safetensors_deeply_nested_header_is_one_line(tmp_path):
    path = write_safetensors_raw(tmp_path / "deep.safetensors", b"[" * 200_000 + b"]" * 200_000)
    with pytest.raises(CorruptFileError, match="header is not JSON"):
        read_safetensors(path)


# ---- PyTorch zip state_dicts --------------------------------------------------------------------

def _torch_members(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.ones(4)}, tmp_path / "ok.pt")
    with zipfile.ZipFile(tmp_path / "ok.pt") as zf:
        return {n: zf.read(n) for n in zf.namelist()}


@pytest.mark.torch
def test_state_dict_pickle_bomb_is_refused_before_torch_reads_it(tmp_path):
    from onnxport.core.io.param_files import read_state_dict

    data = _torch_members(tmp_path)
    members = [deflated_zeros(n, data[n], 4 << 30) if n.endswith("data.pkl") else stored(n, data[n]) for n in data]
    write_zip(tmp_path / "bomb.pt", members)
    # torch would inflate data.pkl whole (4 GiB) if the guard were missing: run it bounded.
    code = ("from onnxport.core.io.param_files import read_state_dict\n"
            "from onnxport.core.util.errors import OnnxportError\n"
            "try:\n    read_state_dict('bomb.pt')\nexcept OnnxportError as e:\n    print(e.one_line())")
    done = run_bounded(code, limit_gb=3.0, cwd=tmp_path)
    assert done.returncode == 0 and "data.pkl' declares 4.0 GiB uncompressed" in done.stdout, done.stderr[-2000:]
    big = [stored(n, data[n] + bytes(TORCH_PICKLE_MAX)) if n.endswith("data.pkl") else stored(n, data[n])
           for n in data]
    with pytest.raises(CorruptFileError, match="over onnxport's limit of 16.0 MiB for a state_dict's pickle"):
        read_state_dict(write_zip(tmp_path / "big.pt", big))
    ok = read_state_dict(write_zip(tmp_path / "ok2.pt", [stored(n, data[n]) for n in data]))
    np.testing.assert_array_equal(ok["w"].array(), np.ones(4, np.float32))


@pytest.mark.torch
def test_state_dict_storage_larger_than_its_record_is_one_line(tmp_path):
    from onnxport.core.io.param_files import read_state_dict

    data = _torch_members(tmp_path)
    big = b"J" + (1 << 30).to_bytes(4, "little")
    members = []
    for name, body in data.items():
        if name.endswith("data.pkl"):
            body = body.replace(b"K\x04t", big + b"t").replace(b"K\x04\x85", big + b"\x85")
            assert big in body
        members.append(stored(name, body))
    with pytest.raises(CorruptFileError, match="not a readable PyTorch file"):
        read_state_dict(write_zip(tmp_path / "numel.pt", members))
