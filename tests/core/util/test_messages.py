"""The one-line message helpers: `util.errors.cannot_write` and `util.text.first_line`."""

from __future__ import annotations

import errno
import os

import pytest

from onnxport.core.export.staging import write_json_atomic
from onnxport.core.util.errors import OnnxportError, cannot_write
from onnxport.core.util.text import first_line


def test_cannot_write_names_the_path_and_the_os_reason():
    err = cannot_write("/out/m.onnx", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    assert isinstance(err, OnnxportError)
    assert str(err) == f"cannot write /out/m.onnx: {os.strerror(errno.ENOSPC)}"
    assert str(cannot_write("m.onnx", OSError("no strerror here"))) == "cannot write m.onnx: no strerror here"
    assert str(cannot_write("m.onnx", "it is a folder")) == "cannot write m.onnx: it is a folder"


def test_a_real_write_failure_reads_the_same(tmp_path):
    """A destination whose folder is gone: the staging writer's error is the helper's line."""
    target = tmp_path / "gone" / "report.json"
    with pytest.raises(OnnxportError) as info:
        write_json_atomic(target, {"a": 1})
    assert str(info.value).startswith(f"cannot write {target}: ")


def test_first_line_of_an_exception():
    assert first_line(RuntimeError("  first\nsecond\n")) == "first"
    assert first_line(ValueError("")) == "ValueError"
    cut = first_line(ValueError("x" * 400 + "y" * 100), 200)  # the end kept: an error's reason comes last
    assert len(cut) == 200 and " ... " in cut and cut.endswith("y" * 100)
