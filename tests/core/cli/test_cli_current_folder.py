"""A stranger's folder holding `json.py`, `struct.py` or an `onnxport/` package runs none of it when
the user runs onnxport inside it: the commands that start children (bench, validate, quantize,
deploy, export --validate, all on generated inputs) and `onnxport gui` start them isolated from
the current folder (util/child_call.child_command)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from ..model_builders import forward_mlp

ONNXPORT = Path(sys.executable).with_name("onnxport")  # the installed command, as a user runs it
HOSTILE = ("json.py", "struct.py", "onnxport/__init__.py")


@pytest.fixture
def hostile(tmp_path) -> Path:
    """A model's folder with modules that leave a `<file>.ran` marker beside them when imported."""
    for name in HOSTILE:
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text("open(__file__ + '.ran', 'w').close()\n")
    onnx.save(forward_mlp(), tmp_path / "m.onnx")
    return tmp_path


def _ran(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.ran"))


@pytest.mark.parametrize("args", [
    ["bench", "m.onnx"],
    ["validate", "m.onnx", "--reference", "m.onnx"],
    ["quantize", "m.onnx", "-o", "q.onnx", "--mode", "dynamic"],
    ["deploy", "m.onnx", "--target", "ort-1.17", "-o", "d.onnx"],
    ["export", "m.onnx", "--outputs", "probabilities", "-o", "e.onnx", "--validate"],
], ids=lambda args: args[0])
def test_a_command_starting_children_runs_no_module_of_the_current_folder(hostile, args):
    done = subprocess.run([str(ONNXPORT), *args], cwd=hostile, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    assert _ran(hostile) == []


def test_onnxport_gui_runs_no_module_of_the_current_folder(hostile):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    done = subprocess.run([str(ONNXPORT), "gui"], cwd=hostile, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 2 and "no display" in done.stderr  # the app started, and ended at once
    assert _ran(hostile) == []
