"""Dtype and shape of every tensor of a big model, inferred in a child process started early.

Why: at 100,000 nodes the open spent as long waiting for shape inference, then reading the
ValueInfos back, as on its own work. `TypeInference.start(path)` starts the child as soon as the
model file is known, so inference runs on another core while this process reads the graph. The
child answers with `(dtype, dims)` per tensor, each distinct type once, in JSON lines of a few
thousand tensors (JSON: its answer about a stranger's file cannot run code here; short lines: no
single parse holds the GIL for long). It also runs `model_io.check_loaded` on the bytes it parsed
and sends that verdict first (`verdict()`), off the open's critical path.

Contract: `start(path)` never raises (no child: `result()` is None); `result()` waits and returns
name -> (dtype, shape) for the main graph's tensors, or None when the child failed (the caller
falls back to `shape_infer`); `close()` kills a child still running. Best effort: a model
inference cannot handle gives fewer shapes, never an error.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import onnx

from onnxport.core.graph.tensor_info import Dim
from onnxport.core.util.background import make_background
from onnxport.core.util.progress import CancelToken

TIMEOUT_S = 600
POLL_S = 0.05  # how often a wait for the child looks at the cancel token
LINE_TENSORS = 4096  # tensors per JSON line

Types = dict[str, tuple[str | None, tuple[Dim, ...] | None]]

_CHILD = r"""
import json, sys, onnx
from onnx import shape_inference
from onnxport.core.graph.shape_infer import propagate_data
from onnxport.core.graph.tensor_info import shape_of
from onnxport.core.io.model_io import SMALL_TENSOR_BYTES, check_loaded, read_graph, tensor_nbytes
from onnxport.core.util.errors import OnnxportError
model, identity = read_graph(sys.argv[1])  # external data is never read: headers only
try:  # first line: the load checks' verdict on these bytes (see `verdict`)
    check_loaded(model, sys.argv[1], identity.size)
    error = None
except OnnxportError as exc:
    error = [str(exc), exc.hint]
sys.stdout.write(json.dumps({"identity": list(identity), "error": error}) + "\n")
sys.stdout.flush()
if error is not None:
    sys.exit(0)
for t in model.graph.initializer:  # weights out, in place (this copy is ours): what strip_weights keeps
    if t.data_location == onnx.TensorProto.EXTERNAL or tensor_nbytes(t) > SMALL_TENSOR_BYTES:
        name, data_type, dims, doc = t.name, t.data_type, list(t.dims), t.doc_string
        t.Clear()
        t.name, t.data_type, t.doc_string = name, data_type, doc
        t.dims.extend(dims)
inputs = list(model.graph.input)
model = shape_inference.infer_shapes(model, check_type=False, strict_mode=False,
                                     data_prop=propagate_data(model))
kinds, seen, found = [], {}, {}
def kind(vtype):
    key = vtype.SerializeToString()  # most tensors share a few types: shape_of once per type
    k = seen.get(key)
    if k is None:
        k = seen[key] = len(kinds)
        dtype, dims = shape_of(vtype)
        kinds.append([dtype, None if dims is None else list(dims)])
    return k
for vi in list(model.graph.value_info) + list(model.graph.output):
    found[vi.name] = kind(vi.type)
for vi in inputs:
    if vi.name not in found:
        found[vi.name] = kind(vi.type)
out = sys.stdout
items = list(found.items())
step, sent = int(sys.argv[2]), 0
for i in range(0, len(items), step):  # each line: [types first used here, [[name, type number], ...]]
    chunk = items[i:i + step]
    upto = max(sent, max(k for _, k in chunk) + 1)
    out.write(json.dumps([kinds[sent:upto], chunk]) + "\n")
    sent = upto
"""


class TypeInference:
    """A child inferring the types of one model file; see the module docstring."""

    def __init__(self, proc: subprocess.Popen | None) -> None:
        self._proc = proc
        self._verdict: Verdict | None = None
        self._verdict_read = False
        self._lines: list[bytes] | None = None  # the child's whole answer, once `wait` read it
        self._code: int | None = None

    @classmethod
    def start(cls, path: str | Path) -> TypeInference:
        args = [sys.executable, "-c", _CHILD, str(path), str(LINE_TENSORS)]
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL)
            make_background(proc)  # the open it runs beside comes first
        except OSError:
            proc = None
        return cls(proc)

    def verdict(self, cancel: CancelToken | None = None, timeout: float | None = None) -> Verdict | None:
        """The child's `model_io.check_loaded` of the file, with the identity of the bytes it
        checked; None if it gave none (it failed, was closed first, or did not answer within
        `timeout` seconds). Its first line: it comes long before the types. Checks `cancel`
        while waiting (a cancel kills the child)."""
        if self._verdict_read:
            return self._verdict
        proc = self._proc
        if proc is None:
            return None
        try:
            if not self._wait_for_answer(proc, cancel, timeout):
                return None  # not read: `result` still takes it
            self._verdict_read = True
            answer = json.loads(proc.stdout.readline())
            error = answer["error"]
            self._verdict = Verdict(tuple(answer["identity"]),
                                    None if error is None else (str(error[0]), error[1] and str(error[1])))
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            self.close()
        return self._verdict

    def wait(self, cancel: CancelToken | None = None) -> None:
        """Wait until the child has answered in full, reading its lines without parsing them:
        the wait holds the GIL only for a few reads, so the app runs it outside the side jobs'
        lane and parses (`result`) in the lane, never beside another side job's Python."""
        proc = self._proc
        if proc is None or self._lines is not None:
            return
        if self.verdict(cancel) is None or self._verdict.error is not None:
            self.close()
            return
        try:
            self._wait_for_answer(proc, cancel)
            self._lines = proc.stdout.read().splitlines()
            self._code = proc.wait(timeout=TIMEOUT_S)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.close()
            return
        proc.stdout.close()
        self._proc = None

    def result(self, cancel: CancelToken | None = None) -> Types | None:
        """name -> (dtype, shape) once the child is done (see `wait`); None if it failed. Checks
        `cancel` while waiting and between lines (a cancel kills the child)."""
        self.wait(cancel)
        lines, self._lines = self._lines, None
        if lines is None or self._code != 0:
            return None
        types: Types = {}
        kinds: list = []
        try:
            for i, line in enumerate(lines):
                if cancel is not None and not i % 8:
                    cancel.check()
                new, chunk = json.loads(line)  # the types first used in this line, [name, type number] pairs
                kinds += [(dtype, None if dims is None else tuple(dims)) for dtype, dims in new]
                for name, k in chunk:
                    types[name] = kinds[k]
        except (ValueError, TypeError, IndexError):
            return None
        return types

    def _wait_for_answer(self, proc: subprocess.Popen, cancel: CancelToken | None,
                         timeout: float | None = None) -> bool:
        """Block until the child has a line for us (or has ended), checking `cancel` every POLL_S:
        a cancel kills the child at once instead of after the inference. False if `timeout`
        seconds passed first."""
        if cancel is None and timeout is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while not selector.select(POLL_S):
                if cancel is not None and cancel.cancelled:
                    self.close()
                    cancel.check()
                if deadline is not None and time.monotonic() > deadline:
                    return False
        return True

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


class Verdict(NamedTuple):
    """What the child's load checks found: `error` is (message, hint) or None (the file is sound)."""

    identity: tuple[int, ...]
    error: tuple[str, str | None] | None


@dataclass
class PendingTypes:
    """Types an index was built without (`build_index(wait_types=False)`): the child still
    inferring them, and the model and path to infer them again from if it fails."""

    inference: TypeInference
    model: onnx.ModelProto
    path: str | Path | None
