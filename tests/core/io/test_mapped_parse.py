"""A big model file is parsed through a memory map: the model `onnx.load` gives, the refusals the
whole-file read gave, and a file that shrinks meanwhile is refused (a mapping touched past the end
of its file would kill the process)."""

from __future__ import annotations

import os
import subprocess
import sys

import onnx
import pytest

from onnxport.core.io import model_io
from onnxport.core.io.model_io import read_graph
from onnxport.core.util.errors import CorruptFileError

from .test_chunked_parse import model_bytes


@pytest.fixture
def mapped(monkeypatch):
    """Every file over 64 KB is mapped."""
    monkeypatch.setattr(model_io, "MAPPED_PARSE_BYTES", 1 << 16)


def test_a_mapped_parse_is_the_loaded_model(tmp_path, mapped):
    path = tmp_path / "m.onnx"
    path.write_bytes(model_bytes())
    model, identity = read_graph(path)
    assert model == onnx.load(path) and identity.size == path.stat().st_size


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_mapped_file_is_refused_as_before(tmp_path, mapped, damage):
    data = model_bytes()
    path = tmp_path / "m.onnx"
    path.write_bytes(data[:-1000] if damage == "truncated" else data[:100] + bytes(range(256)) * 200 + data[100:])
    with pytest.raises(CorruptFileError, match="not a readable ONNX model"):
        read_graph(path)


SHRINKS = """
import os, sys
from onnxport.core.io import model_io
from onnxport.core.util.errors import CorruptFileError
model_io.MAPPED_PARSE_BYTES = 1 << 16
real = model_io.parse_model
def shrinking(data, *args, **kwargs):
    os.truncate(sys.argv[1], 100)  # another program rewrites the file in place
    return real(data, *args, **kwargs)
model_io.parse_model = shrinking
try:
    model_io.read_graph(sys.argv[1])
except CorruptFileError as exc:
    print(exc)
"""


def test_a_file_that_shrinks_while_it_is_parsed_is_refused(tmp_path):
    """In a child: without the checks the parse would read past the file's end and die (SIGBUS)."""
    path = tmp_path / "m.onnx"
    path.write_bytes(model_bytes())
    done = subprocess.run([sys.executable, "-c", SHRINKS, str(path)], capture_output=True, text=True,
                          timeout=600, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr[-500:]
    assert "changed while it was read" in done.stdout


def test_a_file_system_that_cannot_map_files_is_read_whole(tmp_path, mapped, monkeypatch):
    path = tmp_path / "m.onnx"
    path.write_bytes(model_bytes())

    def no_map(*args, **kwargs):
        raise OSError(19, "No such device")  # what mmap says on a file system without it

    monkeypatch.setattr(model_io.mmap, "mmap", no_map)
    assert read_graph(path)[0] == onnx.load(path)
