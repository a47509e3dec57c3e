"""Where the training environment is: a Python that has `onnxruntime-training` 1.19.2.

That package is an onnxruntime of its own (it can never share a venv with the current
`onnxruntime`), exists only for Python <= 3.11, needs `onnx<1.18` and imports torch on import.
So onnxport's own environment never holds it; training-only work runs in a separate
environment's Python, found here:

1. `ONNXPORT_TRAINING_PYTHON`, when set (a path to that Python);
2. else `.venv-training/bin/python` beside the environment onnxport runs in (the Makefile
   creates `.venv-training` next to `.venv` with `python3.11`, where one exists).
Nothing here starts a process or imports onnxruntime: finding costs a few `stat` calls.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from onnxport.core.util.errors import UnavailableError

ENV_VARIABLE = "ONNXPORT_TRAINING_PYTHON"
FOLDER = ".venv-training"
HOW_TO_GET = (f"run `make training-env` (needs python3.11), or set {ENV_VARIABLE} to a Python >= 3.8, <= 3.11 "
              "with onnxruntime-training-cpu==1.19.2 and onnx<1.18")


def candidates() -> list[Path]:
    """The Pythons looked for, in order."""
    explicit = os.environ.get(ENV_VARIABLE)
    if explicit:
        return [Path(explicit)]
    here = Path(sys.prefix)
    return [here.parent / FOLDER / "bin" / "python", here / FOLDER / "bin" / "python"]


def find_training_python() -> Path | None:
    """The training environment's Python, or None when there is none."""
    for path in candidates():
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def require_training_python() -> Path:
    """The training environment's Python; `UnavailableError` (one line, how to get it) without one."""
    found = find_training_python()
    if found is None:
        looked = candidates()[0]
        raise UnavailableError(f"this needs the training environment (onnxruntime-training 1.19.2), "
                               f"not found at {looked}: {HOW_TO_GET}")
    return found
