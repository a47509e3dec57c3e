"""Dtype and shape of every tensor of a big model, inferred in a child process started early.

Why: at 100,000 nodes the open spent as long waiting for shape inference, then reading the
ValueInfos back, as on its own work. `TypeInference.start(path)` starts the child as soon as the
model file is known, so inference runs on another core while this process reads the graph. The
child answers with `(dtype, dims)` per tensor, each distinct type once, in JSON lines of a few
thousand tensors (JSON: its answer about a stranger's file cannot run code here; short lines: no
single parse holds the GIL for long). It also runs `model_io.check_loaded` on the bytes it parsed
and sends that verdict first (`verdict()`), off the open's critical path.

Contract: `start(path)` never raises, and holds the child back for a graph inferred in process
(`ensure_started` starts it); no child: `result()` is None. `result()` waits and returns name ->
(dtype, shape) for the main graph's tensors, or None when the child failed (the caller falls back
to `shape_infer`); `close()` kills a child still running. Best effort: never an error.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import onnx

from onnxport.core.graph import shape_infer
from onnxport.core.graph.tensor_info import Dim
from onnxport.core.io.graph_peek import count_nodes
from onnxport.core.util.child_call import Child, start_child
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken

LINE_TENSORS = 4096  # tensors per JSON line
TARGET = "onnxport.core.graph.shape_types:infer_types"  # the child's function (util.child_call)

Types = dict[str, tuple[str | None, tuple[Dim, ...] | None]]


def infer_types(request: dict, data: bytes, channel) -> None:
    """The child's side (run by util.child_call): the verdict, then the types in JSON lines."""
    from onnx import shape_inference

    from onnxport.core.graph.shape_infer import propagate_data
    from onnxport.core.graph.tensor_info import shape_of
    from onnxport.core.io.model_io import SMALL_TENSOR_BYTES, check_loaded, read_graph, tensor_nbytes

    path = request["path"]
    model, identity = read_graph(path)  # external data is never read: headers only
    try:  # first message: the load checks' verdict on these bytes (see `verdict`)
        check_loaded(model, path, identity.size)
        error = None
    except OnnxportError as exc:
        error = [str(exc), exc.hint]
    channel.send({"identity": list(identity), "error": error})
    if error is not None:
        return
    for t in model.graph.initializer:  # weights out, in place (this copy is ours): what strip_weights keeps
        if t.data_location == onnx.TensorProto.EXTERNAL or tensor_nbytes(t) > SMALL_TENSOR_BYTES:
            name, data_type, dims, doc = t.name, t.data_type, list(t.dims), t.doc_string
            t.Clear()
            t.name, t.data_type, t.doc_string = name, data_type, doc
            t.dims.extend(dims)
    inputs = list(model.graph.input)
    model = shape_inference.infer_shapes(model, check_type=False, strict_mode=False,
                                         data_prop=propagate_data(model))
    kinds: list = []
    seen: dict[bytes, int] = {}
    found: dict[str, int] = {}

    def kind(vtype) -> int:
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
    items = list(found.items())
    step, sent = int(request["line_tensors"]), 0
    for i in range(0, len(items), step):  # each line: [types first used here, [[name, type number], ...]]
        chunk = items[i:i + step]
        upto = max(sent, max(k for _, k in chunk) + 1)
        channel.send(json.dumps([kinds[sent:upto], chunk]).encode())  # bytes: parsed by `result`
        sent = upto


class TypeInference:
    """A child inferring the types of one model file; see the module docstring."""

    def __init__(self, proc: Child | None) -> None:
        self._proc = proc
        self._verdict: Verdict | None = None
        self._verdict_read = False
        self._lines: list[bytes] | None = None  # the child's whole answer, once `wait` read it
        self._failed = False  # the child raised or died: no answer
        self._held: str | None = None  # the path of a child `start` held back

    @classmethod
    def start(cls, path: str | Path) -> TypeInference:
        """The child for `path`, held back when the file's main graph is one inferred in process
        (under `shape_infer.OUT_OF_PROCESS_NODES` nodes, counted from its fields' headers:
        io.graph_peek): an open starts this before parsing, and a big file with a small graph
        would only have the child killed again. `ensure_started` starts a held-back one."""
        inference = cls(None)
        inference._held = os.path.abspath(path)  # the child runs in another folder
        enough = shape_infer.OUT_OF_PROCESS_NODES
        nodes = count_nodes(path, enough)
        if nodes is None or nodes >= enough:
            inference.ensure_started()
        return inference

    def ensure_started(self) -> None:
        """Start the child `start` held back (a caller whose own count says the graph is big)."""
        path, self._held = self._held, None
        if path is not None:  # in the background: the open it runs beside comes first
            self._proc = start_child(TARGET, {"path": path, "line_tensors": LINE_TENSORS}, background=True)

    def verdict(self, cancel: CancelToken | None = None, timeout: float | None = None) -> Verdict | None:
        """The child's `model_io.check_loaded` of the file, with the identity of the bytes it
        checked; None if it gave none (it failed, was closed first, or did not answer within
        `timeout` seconds). Its first message: it comes long before the types. A cancel of
        `cancel` while waiting kills the child."""
        if self._verdict_read:
            return self._verdict
        run = self._proc
        if run is None:
            return None
        try:
            answer = self._receive(run, cancel, timeout)
        except TimeoutError:
            return None  # not read: `result` still takes it
        self._verdict_read = True
        try:
            error = answer["error"]
            self._verdict = Verdict(tuple(answer["identity"]),
                                    None if error is None else (str(error[0]), error[1] and str(error[1])))
        except (ValueError, TypeError, KeyError, IndexError):
            self.close()
        return self._verdict

    def wait(self, cancel: CancelToken | None = None) -> None:
        """Wait until the child has answered in full, keeping its lines without parsing them:
        the wait holds the GIL only for a few reads, so the app runs it outside the side jobs'
        lane and parses (`result`) in the lane, never beside another side job's Python."""
        run = self._proc
        if run is None or self._lines is not None:
            return
        if self.verdict(cancel) is None or self._verdict.error is not None:
            self.close()
            return
        lines = []
        while (line := self._receive(run, cancel)) is not None:
            lines.append(line)
        self._lines, self._proc = lines, None

    def result(self, cancel: CancelToken | None = None) -> Types | None:
        """name -> (dtype, shape) once the child is done (see `wait`); None if it failed. Checks
        `cancel` while waiting and between lines (a cancel kills the child)."""
        self.wait(cancel)
        lines, self._lines = self._lines, None
        if lines is None or self._failed:
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

    def _receive(self, run: Child, cancel: CancelToken | None, timeout: float | None = None):
        """The child's next message; None when it ended or failed (then it is closed). A cancel
        kills it and raises `Cancelled`; `timeout` raises `TimeoutError`, the child running on."""
        try:
            message = run.receive(cancel, timeout)
        except Cancelled:
            self.close()
            raise
        except OnnxportError:  # the child failed (an unreadable file) or died: best effort, no types
            message, self._failed = None, True
        if message is None:
            self.close()
        return message

    def close(self) -> None:
        """Kill the child if it still runs (never raises); one held back never starts."""
        run, self._proc, self._held = self._proc, None, None
        if run is not None:
            run.close()


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
