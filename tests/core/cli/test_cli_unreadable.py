"""`onnxport inspect` of something it cannot read ends in one line and exit 2, never exit 0:
a folder of garbage, an empty folder, a model cut short anywhere, a file it may not open."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import onnx
import pytest

from onnxport.core.cli import main
from onnxport.core.io.model_io import load_graph
from onnxport.core.util.errors import OnnxportError

from ..model_builders import forward_mlp


def one_line_exit_2(capsys, *args: str) -> str:
    assert main(list(args)) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    assert captured.out == ""
    return captured.err


def test_folder_of_garbage_and_empty_folder(tmp_path, capsys):
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "a.bin").write_bytes(os.urandom(3000))
    (garbage / "b.txt").write_text("hello")
    err = one_line_exit_2(capsys, "inspect", str(garbage))
    assert "no ONNX model or parameter file" in err and "a.bin" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no ONNX model" in one_line_exit_2(capsys, "inspect", str(empty))


def test_a_model_cut_short_anywhere_is_refused(tmp_path, capsys):
    data = forward_mlp().SerializeToString()
    path = tmp_path / "cut.onnx"
    for n in range(1, len(data)):
        path.write_bytes(data[:n])
        with pytest.raises(OnnxportError):
            load_graph(path)
    path.write_bytes(data[: data.rindex(forward_mlp().opset_import[0].SerializeToString()) - 2])  # graph whole
    assert onnx.ModelProto.FromString(path.read_bytes()).graph.node  # protobuf alone accepts it
    assert "truncated" in one_line_exit_2(capsys, "inspect", str(path))


def _without_read_rights(args: list[str]) -> subprocess.CompletedProcess:
    """Run the CLI unable to bypass file permissions (root keeps its uid, loses the capabilities)."""
    command = [sys.executable, "-m", "onnxport.core.cli", *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: permissions cannot be denied")
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("target", ["file", "folder"])
def test_a_file_it_may_not_read(tmp_path, target):
    folder = tmp_path / "models"
    folder.mkdir()
    path = folder / "m.onnx"
    onnx.save(forward_mlp(), path)
    path.chmod(0)
    try:
        proc = _without_read_rights(["inspect", str(path if target == "file" else folder)])
    finally:
        path.chmod(0o644)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "m.onnx" in proc.stderr and "ermission denied" in proc.stderr
