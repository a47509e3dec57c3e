"""Dtype and shape of every tensor of a big model, inferred in a child process started early.

Why: at 100,000 nodes the index spent as long waiting for shape inference (`shape_infer` runs it
in a child: it holds the GIL) as on its own work, then as long again reading 100,000 ValueInfos
back field by field (`tensor_info.shape_of`, ~1 s). `TypeInference.start(path)` starts the child
as soon as the model file is known, so inference runs on the other core while this process
loads and reads the graph; the child answers with what the index needs - `(dtype, dims)` per
tensor, as `shape_of` gives them - in JSON lines of a few thousand tensors each (JSON: the child
parses a stranger's file, and its answer must not be able to run code here; short lines: no
single parse holds the GIL for long).

Contract: `start(path)` never raises (no child: `result()` is None); `result()` waits for the
child and returns name -> (dtype, shape) for the main graph's tensors (value_info, outputs, then
inputs where nothing was inferred), or None when the child failed (the caller falls back to
`shape_infer`). `close()` kills a child still running (cancel, error). Best effort, like
`shape_infer`: a model inference cannot handle gives fewer shapes, never an error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from onnxport.core.graph.tensor_info import Dim
from onnxport.core.util.progress import CancelToken

TIMEOUT_S = 600
LINE_TENSORS = 4096  # tensors per JSON line

Types = dict[str, tuple[str | None, tuple[Dim, ...] | None]]

_CHILD = r"""
import json, sys, onnx
from onnx import shape_inference
from onnxport.core.graph.tensor_info import shape_of
from onnxport.core.io.model_io import strip_weights
model = onnx.load_model(sys.argv[1], load_external_data=False)  # no weights are read: headers only
inputs = list(model.graph.input)
model = shape_inference.infer_shapes(strip_weights(model), check_type=False, strict_mode=False, data_prop=True)
found = {}
for vi in list(model.graph.value_info) + list(model.graph.output):
    found[vi.name] = shape_of(vi.type)
for vi in inputs:
    found.setdefault(vi.name, shape_of(vi.type))
items = [[name, dtype, None if dims is None else list(dims)] for name, (dtype, dims) in found.items()]
step = int(sys.argv[2])
out = sys.stdout
for i in range(0, len(items), step):
    out.write(json.dumps(items[i:i + step]))
    out.write("\n")
"""


class TypeInference:
    """A child inferring the types of one model file; see the module docstring."""

    def __init__(self, proc: subprocess.Popen | None) -> None:
        self._proc = proc

    @classmethod
    def start(cls, path: str | Path) -> TypeInference:
        args = [sys.executable, "-c", _CHILD, str(path), str(LINE_TENSORS)]
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)
        except OSError:
            proc = None
        return cls(proc)

    def result(self, cancel: CancelToken | None = None) -> Types | None:
        """name -> (dtype, shape) once the child is done; None if it failed. Checks `cancel`
        between lines (a cancel kills the child)."""
        proc = self._proc
        if proc is None:
            return None
        types: Types = {}
        try:
            for line in proc.stdout:
                if cancel is not None and cancel.cancelled:
                    self.close()
                    cancel.check()
                for name, dtype, dims in json.loads(line):
                    types[name] = (dtype, None if dims is None else tuple(dims))
            code = proc.wait(timeout=TIMEOUT_S)
        except (OSError, ValueError, TypeError, subprocess.TimeoutExpired):
            self.close()
            return None
        finally:
            proc.stdout.close()
        self._proc = None
        return types if code == 0 else None

    def close(self) -> None:
        """Kill the child if it still runs (never raises)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if proc is not None and proc.stdout is not None and not proc.stdout.closed:
            proc.stdout.close()
