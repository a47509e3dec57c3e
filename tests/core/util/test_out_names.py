"""Destination names at the edges (issue 36, item 6): a legal 245-byte UTF-8 file name is written
(temp and companion names fit NAME_MAX in bytes, not characters), and `-o newdir/` (a trailing
slash names a folder) is refused instead of writing a file called `newdir`."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.util.atomic import AtomicWrite, remove_stale_temps
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.file_names import NAME_MAX
from onnxport.core.util.out_paths import check_kind

from .test_atomic import dead_pid

LONG = ["é" * 120 + ".onnx", "模" * 80 + ".onnx", "😀" * 60 + ".onnx", "a" * 250 + ".onnx"]  # 245-255 bytes


def model(path):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 64])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 64])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("name", LONG)
def test_a_long_utf8_name_gets_temps_and_companions_that_fit(tmp_path, name):
    assert 245 <= len(os.fsencode(name)) <= NAME_MAX
    dest = tmp_path / name
    with AtomicWrite(dest) as tx:
        fd, tmp = tx.new_file()
        os.write(fd, b"model")
        os.close(fd)
        dfd, dtmp = tx.new_file()
        os.close(dfd)
        data = tx.companion("data")
        assert len(os.fsencode(tmp.name)) <= NAME_MAX and len(os.fsencode(data.name)) <= NAME_MAX
        tx.commit([(dtmp, data), (tmp, dest)])
    assert dest.read_bytes() == b"model" and data.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, data.name])


def test_a_killed_runs_temp_of_a_long_name_is_found(tmp_path):
    name = LONG[2]
    with AtomicWrite(tmp_path / name) as tx:
        fd, tmp = tx.new_file()
        os.close(fd)
        stale = tmp.with_name(tmp.name.replace(f".{os.getpid()}.", f".{dead_pid()}."))
        os.rename(tmp, stale)
        assert remove_stale_temps(tmp_path, name) == [stale]


def test_the_cli_writes_a_long_utf8_name(tmp_path, capsys):
    source = model(tmp_path / "m.onnx")
    for name in LONG[:2]:
        assert main(["deploy", str(source), "--target", "ort-1.17", "-o", str(tmp_path / name), "-q"]) == 0
        assert (tmp_path / name).is_file()
    for _ in range(2):  # written, then replaced as one unit: the first run's data file goes
        assert main(["export", str(source), "--outputs", "y", "-o", str(tmp_path / LONG[2]), "--external-data",
                     "always", "-q"]) == 0
    assert onnx.load(tmp_path / LONG[2]).graph.initializer  # its data file beside it, loaded
    data = [p.name for p in tmp_path.iterdir() if p.name.endswith(".data")]
    assert len(data) == 1 and ".." not in data[0] and len(os.fsencode(data[0])) <= NAME_MAX


@pytest.mark.parametrize("command", [
    ["quantize", "{m}", "--mode", "dynamic", "-o", "{d}/newdir/"],
    ["deploy", "{m}", "--target", "ort-1.17", "-o", "{d}/newdir/"],
    ["export", "{m}", "--outputs", "y", "-o", "{d}/newdir/"],
    ["torch-export", "{m}", "--mode", "inference", "-o", "{d}/newdir/"],
])
def test_a_trailing_slash_names_a_folder_and_nothing_is_written(tmp_path, capsys, command):
    source = model(tmp_path / "m.onnx")
    with pytest.raises(SystemExit) as exit_:
        main([a.format(m=source, d=tmp_path) for a in command])
    assert exit_.value.code == 2 and "names a folder (it ends in '/')" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_a_report_or_api_destination_ending_in_a_slash_is_refused(tmp_path, capsys):
    source = model(tmp_path / "m.onnx")
    assert main(["bench", str(source), "--report", f"{tmp_path}/rep/", "-q"]) == 2
    assert "it names a folder" in capsys.readouterr().err
    with pytest.raises(OnnxportError, match="names a folder"):
        check_kind(f"{tmp_path}/newdir/")
    check_kind(f"{tmp_path}/newdir/", folder_ok=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
