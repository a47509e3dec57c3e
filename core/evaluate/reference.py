"""The reference a model is validated against, as something ONNX Runtime's inference session runs.

Contract: `reference_model(path, outputs, params, weights=True)` returns `(model, parameter_feeds)`:
- the reference graph pruned to `outputs` (labels/loss not needed), weights in memory; with
  `weights=False` the weights it keeps stay external references (checked, confined to `path`'s
  folder), so an early exit of a big model is validated with only the weights it needs;
- with `params` (an eval graph + checkpoint) the parameters become *feeds* of their graph inputs,
  as ORT's training `Module` does in eval mode, with no training package;
- training-mode constructs are put in eval semantics with the smallest edit, deliberately not with
  the exporter's own rewrite (an exporter bug cannot hide in its own reference):
  `BatchNormalization(training_mode=1)` gets `training_mode=0` and loses its running-statistics
  outputs; `Dropout`'s `training_mode` input points at a `False` constant. The same holds inside
  If/Loop/Scan bodies, at any depth.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxport.core.evaluate.runtime import load_full
from onnxport.core.graph.index import infer_value_info
from onnxport.core.graph.prune import plan_prune, prune
from onnxport.core.graph.uses import bodies, used_names
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.params.match import match_parameters
from onnxport.core.params.name_alignment import align_if_better
from onnxport.core.util.errors import OnnxportError, UnknownOutputError

FALSE_NAME = "onnxport.reference.training_mode_false"


def reference_model(path: str | Path, outputs: list[str], params: ParameterSet | None = None,
                    weights: bool = True) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    path = Path(path)
    model = load_full(path) if weights else load_graph(path)
    graph = model.graph
    known = {o for n in graph.node for o in n.output if o} | {i.name for i in graph.input}
    for name in outputs:
        if name not in known:
            raise UnknownOutputError(f"{path}: the reference has no tensor '{name}' (an output of the model "
                                     "being validated); validate against the model it was made from")
    if params is not None:
        params, _ = align_if_better(model, params)  # a state_dict named the PyTorch way (as the export did)
        match_parameters(model, params).raise_if_unusable()
        _initializers_to_inputs(model, set(params))
    typed = {vi.name for vi in list(graph.output) + list(graph.value_info) + list(graph.input)}
    value_info = infer_value_info(model) if any(o not in typed for o in outputs) else None
    pruned = prune(model, plan_prune(model, outputs), value_info).model  # in place: `model` is ours
    eval_semantics(pruned.graph)
    feeds: dict[str, np.ndarray] = {}
    if params is not None:
        inputs = {vi.name: vi for vi in pruned.graph.input}
        for name in inputs:
            if name in params:
                feeds[name] = _param_array(params, name, inputs[name])
    return pruned, feeds


def _param_array(params: ParameterSet, name: str, vi: onnx.ValueInfoProto) -> np.ndarray:
    p = params[name]
    try:
        array = np.asarray(p.array())
    except OSError as exc:
        raise OnnxportError(f"{p.source or 'checkpoint'}: cannot read parameter '{name}' ({exc})") from None
    elem = vi.type.tensor_type.elem_type
    if elem and elem != p.elem_type:
        array = array.astype(helper.tensor_dtype_to_np_dtype(elem))
    return np.ascontiguousarray(array)


def _initializers_to_inputs(model: onnx.ModelProto, names: set[str]) -> None:
    """Initializers the checkpoint overrides become graph inputs (fed with the trained values)."""
    graph = model.graph
    inputs = {vi.name for vi in graph.input}
    keep = []
    for t in graph.initializer:
        if t.name in names:
            if t.name not in inputs:
                graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            keep.append(t)
    del graph.initializer[:]
    graph.initializer.extend(keep)


def eval_semantics(graph: onnx.GraphProto) -> list[str]:
    """Edit BatchNormalization/Dropout in place, in `graph` and in its If/Loop/Scan bodies at any depth
    (see the module docstring); returns changed node names. The `False` constant Dropouts read is one
    initializer of `graph` (bodies read it from there)."""
    changed: list[str] = []
    if _graph_eval_semantics(graph, changed) and FALSE_NAME not in {t.name for t in graph.initializer}:
        graph.initializer.append(numpy_helper.from_array(np.array(False), FALSE_NAME))
    return changed


def _graph_eval_semantics(graph: onnx.GraphProto, changed: list[str]) -> bool:
    """One graph, then its bodies; returns whether a Dropout now reads FALSE_NAME."""
    used = used_names(graph)  # what bodies capture counts: running statistics a branch reads are used
    need_false = False
    for node in graph.node:
        for _, body in bodies(node):
            need_false |= _graph_eval_semantics(body, changed)
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "BatchNormalization":
            training = any(a.name == "training_mode" and a.i for a in node.attribute)
            if training or len([o for o in node.output if o]) > 1:
                for a in node.attribute:
                    if a.name == "training_mode":
                        a.i = 0
                extra = [o for o in node.output[1:] if o]
                if any(o in used for o in extra):
                    raise OnnxportError(f"BatchNormalization '{node.name}': its running statistics are used by "
                                        "the outputs, which only exist in training mode")
                del node.output[1:]
                changed.append(node.name)
        elif node.op_type == "Dropout" and len(node.input) >= 3 and node.input[2]:
            node.input[2] = FALSE_NAME
            need_false = True
            changed.append(node.name)
    return need_false
