"""A crafted file reads nothing outside its folder and allocates nothing it does not hold.

Every place a tensor can live (main graph, If/Loop/Scan bodies, Constant attributes, sparse
initializers) x every way out of the folder (absolute path, `..`, a symlinked file, a symlinked
folder) is refused by the loader, by export, inspect, validate, quantize, bench and the preview,
with one line naming the tensor and the location, exit 2, the existing output untouched and no
file left behind. The same references inside the folder still export, with the right values.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

from onnxport.core.cli import main
from onnxport.core.evaluate.runtime import session
from onnxport.core.graph.weightless import weightless_bytes
from onnxport.core.io.external_data import check_model_tensors, external_reference, iter_tensors
from onnxport.core.io.model_io import load_graph
from onnxport.core.util.errors import CorruptFileError, OnnxportError

from ..external_builders import SECRET, WHERE, W, ext_tensor, finish, model_with_external, save

ESCAPES = ("absolute", "climb", "symlink-file", "symlink-folder")


@pytest.fixture
def outside(tmp_path):
    """A file outside the model's folder holding SECRET."""
    secret = tmp_path / "secret.bin"
    secret.write_bytes(SECRET.tobytes())
    return secret


def escaping_model(tmp_path, outside, where: str, escape: str):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    if escape == "absolute":
        location = str(outside)
    elif escape == "climb":
        location = "../" + outside.name
    elif escape == "symlink-file":
        (folder / "w.bin").symlink_to(outside)
        location = "w.bin"
    else:  # a folder inside that is a link to the outside
        (folder / "weights").symlink_to(outside.parent, target_is_directory=True)
        location = "weights/" + outside.name
    path = folder / "m.onnx"
    save(model_with_external(where, location), path)
    return path, location


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("escape", ESCAPES)
def test_loader_refuses_references_leaving_the_folder(tmp_path, outside, where, escape):
    path, location = escaping_model(tmp_path, outside, where, escape)
    with pytest.raises(CorruptFileError) as info:
        load_graph(path)
    message = str(info.value)
    assert str(path) in message and location in message
    assert "absolute path" in message if escape == "absolute" else "outside the model's folder" in message
    tensor = "'w_then'" if where == "subgraph" else "'w'" if where != "constant" else "'const_w'"
    assert tensor in message


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("escape", ESCAPES)
def test_export_refuses_and_leaves_the_output_alone(tmp_path, outside, where, escape, capsys):
    path, location = escaping_model(tmp_path, outside, where, escape)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "o.onnx"
    out.write_bytes(b"keep me")
    code, _, err = run_cli(capsys, "export", str(path), "--outputs", "y", "-o", str(out), "-q")
    assert_one_line(code, err, location)
    assert out.read_bytes() == b"keep me"
    assert sorted(p.name for p in out_dir.iterdir()) == ["o.onnx"]  # no temp file left


@pytest.mark.parametrize("escape", ESCAPES)
def test_inspect_validate_quantize_bench_refuse_before_any_reader(tmp_path, outside, escape, capsys):
    path, location = escaping_model(tmp_path, outside, "subgraph", escape)
    good = tmp_path / "good.onnx"
    save(finish([onnx.helper.make_node("Add", ["x", "w"], ["y"])], [onnx.numpy_helper.from_array(W, "w")]), good)
    out = tmp_path / "q.onnx"
    for args in (["inspect", str(path)], ["validate", str(path), "--reference", str(good)],
                 ["quantize", str(path), "-o", str(out), "--mode", "fp16"],
                 ["bench", str(good), str(path), "--json"]):
        code, _, err = run_cli(capsys, *args)
        assert_one_line(code, err, location, "'w_then'")
    assert not out.exists()
    with pytest.raises(OnnxportError, match="outside the model's folder|absolute path"):
        session(path)  # ONNX Runtime is never handed the path
    with pytest.raises(OnnxportError, match="outside the model's folder|absolute path"):
        weightless_bytes(path)


@pytest.mark.parametrize("where", WHERE)
def test_references_inside_the_folder_export_with_their_values(tmp_path, where, capsys):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "real.bin").write_bytes(b"\0" * 8 + W.tobytes())
    (folder / "w.bin").symlink_to(folder / "sub" / "real.bin")  # a link that stays inside is fine
    path = folder / "m.onnx"
    save(model_with_external(where, "w.bin", offset=8, length=16), path)
    out_dir = tmp_path / "elsewhere"  # the output's folder holds no w.bin: nested tensors must be inlined
    out_dir.mkdir()
    code, _, err = run_cli(capsys, "export", str(path), "--outputs", "y", "-o", str(out_dir / "o.onnx"), "-q")
    assert code == 0, err
    sess = session(out_dir / "o.onnx")
    (got,) = sess.run(None, {"x": np.zeros(4, np.float32)})
    np.testing.assert_array_equal(got, W)
    assert SECRET.tobytes() not in (out_dir / "o.onnx").read_bytes()


@pytest.mark.parametrize(("offset", "length", "words"), [
    ("abc", None, ["offset 'abc'", "not a whole number"]),
    ("-4", None, ["offset -4", "negative"]),
    ("1e3", None, ["offset '1e3'", "not a whole number"]),
    (None, "x", ["length 'x'"]),
    (8, None, ["offset 8", "past the end of the file (16 bytes)"]),
    (17, None, ["offset 17", "past the end"]),
    (0, 8, ["length 8", "does not match"]),
    (0, 2**70, ["length", "does not match"]),
])
@pytest.mark.parametrize("where", ["initializer", "constant"])
def test_bad_offsets_and_lengths_are_one_line(tmp_path, where, offset, length, words, capsys):
    (tmp_path / "w.bin").write_bytes(W.tobytes())
    path = tmp_path / "m.onnx"
    save(model_with_external(where, "w.bin", offset=offset, length=length), path)
    out = tmp_path / "o.onnx"
    out.write_bytes(b"keep me")
    code, _, err = run_cli(capsys, "export", str(path), "--outputs", "y", "-o", str(out), "-q")
    assert_one_line(code, err, "w.bin", *words)
    assert out.read_bytes() == b"keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "o.onnx", "w.bin"]


def test_declared_size_beyond_the_external_file_is_refused(tmp_path):
    (tmp_path / "w.bin").write_bytes(W.tobytes())
    path = tmp_path / "m.onnx"
    save(model_with_external("initializer", "w.bin", dims=(2**31, 2**31)), path)
    with pytest.raises(CorruptFileError, match="past the end of the file"):
        load_graph(path)


@pytest.mark.parametrize("location", ["", "missing.bin", ".", "sub", "a\x00b"])
def test_missing_or_odd_locations(tmp_path, location):
    (tmp_path / "sub").mkdir()
    path = tmp_path / "m.onnx"
    save(model_with_external("initializer", location), path)
    with pytest.raises(CorruptFileError, match="tensor 'w'"):
        load_graph(path)


def huge_inline(tmp_path, raw: bytes | None):
    t = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT)
    t.dims.extend([2**31, 2**31])
    if raw is not None:
        t.raw_data = raw
    path = tmp_path / "huge.onnx"
    save(finish([onnx.helper.make_node("Add", ["x", "w"], ["y"], name="add")], [t]), path)
    return path


@pytest.mark.parametrize("raw", [None, W.tobytes()])
def test_huge_declared_inline_tensor_is_refused_before_any_allocation(tmp_path, raw, capsys):
    path = huge_inline(tmp_path, raw)
    with pytest.raises(CorruptFileError, match="tensor 'w'.*2147483648, 2147483648"):
        load_graph(path)  # the guard: refused while nothing was allocated
    out = tmp_path / "o.onnx"
    out.write_bytes(b"keep me")
    code, _, err = run_cli(capsys, "export", str(path), "--outputs", "y", "-o", str(out), "-q")
    assert_one_line(code, err, "huge.onnx", "tensor 'w'")
    assert out.read_bytes() == b"keep me"


@pytest.mark.parametrize(("dims", "values", "data_type", "words"), [
    ([-1], [1.0], onnx.TensorProto.FLOAT, "negative dimension"),
    ([3], [1.0, 2.0], onnx.TensorProto.FLOAT, "declare 3 values but the tensor holds 2"),
    ([2], [1.0, 2.0], 999, "unknown data type 999"),
])
def test_inconsistent_inline_tensors(tmp_path, dims, values, data_type, words):
    t = onnx.TensorProto(name="w", data_type=data_type)
    t.dims.extend(dims)
    t.float_data.extend(values)
    path = tmp_path / "m.onnx"
    save(finish([onnx.helper.make_node("Add", ["x", "w"], ["y"])], [t]), path)
    with pytest.raises(CorruptFileError, match=words):
        load_graph(path)


def test_short_raw_data_is_refused(tmp_path):
    t = onnx.numpy_helper.from_array(W, "w")
    t.raw_data = t.raw_data[:12]
    path = tmp_path / "m.onnx"
    save(finish([onnx.helper.make_node("Add", ["x", "w"], ["y"])], [t]), path)
    with pytest.raises(CorruptFileError, match="declare 16 bytes but the tensor holds 12"):
        load_graph(path)


def test_every_tensor_is_walked_at_any_depth():
    """Tensors in a Loop body inside an If branch, and in functions, are found too."""
    inner_t = ext_tensor("deep", "x.bin")
    inner = onnx.helper.make_graph([onnx.helper.make_node("Constant", [], ["c"], value=inner_t)], "loop_body",
                                   [], [onnx.helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, [4])])
    loop = onnx.helper.make_node("Loop", ["", ""], ["c_out"], body=inner)
    branch = onnx.helper.make_graph([loop], "then", [], [])
    model = finish([onnx.helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch)])
    fn = onnx.helper.make_function("local", "f", [], ["o"],
                                   [onnx.helper.make_node("Constant", [], ["o"], value=ext_tensor("in_fn", "/x"))],
                                   [onnx.helper.make_opsetid("", 17)])
    model.functions.append(fn)
    names = [t.name for _, t in iter_tensors(model)]
    assert names.count("deep") == 2 and "in_fn" in names
    with pytest.raises(CorruptFileError, match="tensor 'deep'"):
        check_model_tensors(model, "/nowhere/m.onnx")


def test_reference_resolves_inside(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 4 + W.tobytes())
    ref = external_reference(ext_tensor("w", "./w.bin", offset=4), tmp_path)
    assert ref.path == (tmp_path / "w.bin").resolve() and (ref.offset, ref.length) == (4, 16)


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_symlink_loop_is_one_line(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    path = tmp_path / "m.onnx"
    save(model_with_external("initializer", "loop"), path)
    with pytest.raises(CorruptFileError, match="tensor 'w'"):
        load_graph(path)


@pytest.mark.parametrize(("offset_b", "shared"), [(0, "the same bytes"), (8, "half of them")])
def test_tensors_sharing_external_bytes_are_refused(tmp_path, offset_b, shared, capsys):
    """Exporters write each tensor once; a thousand tensors on one region would make an export write a
    thousand copies of it from a small file."""
    (tmp_path / "w.bin").write_bytes(W.tobytes() * 2)
    a = ext_tensor("a", "w.bin", offset=0, length=16)
    b = ext_tensor("b", "w.bin", offset=offset_b, length=16)
    adds = [onnx.helper.make_node("Add", ["x", "a"], ["h"], name="add_a"),
            onnx.helper.make_node("Add", ["h", "b"], ["y"], name="add_b")]
    path = tmp_path / "m.onnx"
    save(finish(adds, [a, b]), path)
    code, _, err = run_cli(capsys, "export", str(path), "--outputs", "y", "-o", str(tmp_path / "o.onnx"), "-q")
    assert_one_line(code, err, "tensor 'b'", "overlaps that of tensor 'a'", "w.bin")
    assert not (tmp_path / "o.onnx").exists()
    # side by side (offset 16) is how exporters write them: accepted, values read
    save(finish(adds, [a, ext_tensor("b", "w.bin", offset=16, length=16)]), path)
    code, _, err = run_cli(capsys, "export", str(path), "--outputs", "y", "-o", str(tmp_path / "o.onnx"), "-q")
    assert code == 0, err
    (got,) = session(tmp_path / "o.onnx").run(None, {"x": np.zeros(4, np.float32)})
    np.testing.assert_array_equal(got, 2 * W)
