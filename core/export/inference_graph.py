"""The inference graph an export writes, built once for the export and for its plan.

`build_inference_graph(model, model_path, outputs, params)` runs the export's passes on a
weight-free copy of `model`: prune to `outputs`, inline nested external tensors, eval-mode
(`graph.eval_mode`), topological order, then (with `fold`) freeze-time folding (`graph.fold`).
It returns the skeleton (graph without initializers) and the constants the writer writes. The
export writes exactly this; the app's "Export keeps" plan counts its nodes and sizes it with
`written_bytes`, so the plan predicts the written model instead of the pruned source graph.
No weight bytes are copied; folding decodes only the small values its budgets allow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core.export.output_types import complete_type
from onnxport.core.export.wire_format import initializer_record_bytes, padded_varint
from onnxport.core.graph.const_tensors import ConstTensor, from_initializer, from_param
from onnxport.core.graph.eval_mode import to_inference_form
from onnxport.core.graph.fold import fold_constants
from onnxport.core.graph.index import infer_value_info
from onnxport.core.graph.passes import FOLDED, PassResult
from onnxport.core.graph.prune import PrunePlan, plan_prune, prune
from onnxport.core.graph.runnable import topological_sort
from onnxport.core.io.external_data import inline_nested_external
from onnxport.core.io.model_io import (
    add_light_initializers,
    byte_size,
    copy_model,
    copy_without_initializers,
    release,
)
from onnxport.core.io.parameter_set import ParameterSet

KnownTypes = Callable[[str], "onnx.TypeProto | None"]  # a tensor's name -> its type where known


@dataclass
class InferenceGraph:
    skeleton: onnx.ModelProto  # the model to write, without initializers
    consts: dict[str, ConstTensor]  # the initializers to write, by name
    plan: PrunePlan
    inference: PassResult  # the eval-mode pass (what it removed/rewrote)
    folded: list[str] = field(default_factory=list)  # the nodes folding computed


def build_inference_graph(model: onnx.ModelProto, model_path: Path | None, outputs: list[str],
                          params: ParameterSet | None, *, fold: bool = True, plan: PrunePlan | None = None,
                          type_outputs: bool = True, check: Callable[[], None] = lambda: None,
                          known_types: KnownTypes | None = None) -> InferenceGraph:
    """See the module docstring. `model` stays as given; `plan`: the prune plan for `outputs`, when
    the caller has it; `known_types` (name -> type or None): the types an index already has, which
    outputs take instead of being inferred (`TensorIndex.tensor_type`); `type_outputs` False skips
    the shape inference that types the other intermediate outputs (it holds the GIL; a plan of a
    big graph does without: tens of bytes); `check` is called between passes (cancel)."""
    if plan is None:
        plan = plan_prune(model, outputs, set(params) if params is not None else set())
    skeleton = copy_without_initializers(model)  # the passes edit this copy; `model` stays as given
    release(prune(skeleton, plan).changes)  # a node each pruned: not freed in one call (model_io.release)
    check()
    if type_outputs or known_types is not None:  # outputs (and cut inputs) that were intermediate tensors
        _type_outputs(skeleton, model, plan, known_types, infer=type_outputs)
        _type_cut_inputs(skeleton, model, plan, params, known_types, infer=type_outputs)
        check()
    folder = model_path.parent if model_path is not None else None
    inline_nested_external(skeleton, folder or Path("."))  # sub-graph/attribute tensors: confined reads
    inference = to_inference_form(skeleton)
    topological_sort(skeleton.graph)  # a no-op unless the source lists nodes out of order
    check()
    consts: dict[str, ConstTensor] = {}
    initializers = {t.name: t for t in model.graph.initializer}
    for name in plan.initializers:
        if params is not None and name in params:
            consts[name] = from_param(name, params[name])  # trained value replaces the initial one
        else:
            consts[name] = from_initializer(initializers[name], folder)
    for name in plan.parameter_inputs:
        consts[name] = from_param(name, params[name])
    folded: list[str] = []
    if fold:
        folding = fold_constants(skeleton, consts)
        consts, folded = folding.constants, folding.names(FOLDED)
    if skeleton.ir_version < FIRST_IR_WITHOUT_INITIALIZER_INPUTS:
        _declare_as_inputs(skeleton, consts)
    return InferenceGraph(skeleton, consts, plan, inference, folded)


def for_writing(built: InferenceGraph, model: onnx.ModelProto, known_types: KnownTypes | None = None) -> InferenceGraph:
    """A copy of `built` (a selection's cached graph, `selection_graph`) the export may edit, its
    outputs typed as `build_inference_graph` types them (`built` skipped inference on big graphs)."""
    skeleton = copy_model(built.skeleton)
    _type_outputs(skeleton, model, built.plan, known_types)
    _type_cut_inputs(skeleton, model, built.plan, None, known_types)
    return InferenceGraph(skeleton, dict(built.consts), built.plan, built.inference, list(built.folded))


FIRST_IR_WITHOUT_INITIALIZER_INPUTS = 4  # before IR 4 every initializer is a graph input too


def _declare_as_inputs(skeleton: onnx.ModelProto, consts: dict[str, ConstTensor]) -> None:
    """Before IR 4 an initializer must also be a graph input (`onnx.checker`: "in initializer but
    not in graph input"): declare those the passes left out or made (folded), after the others. A
    folded constant whose shape is known only once computed is computed here (such models are old
    and small)."""
    declared = {vi.name for vi in skeleton.graph.input}
    for const in consts.values():
        if const.name in declared:
            continue
        elem_type, shape = const.elem_type, const.shape
        if shape is None:
            values = const.values()
            shape = values.shape
            try:
                elem_type = onnx.helper.np_dtype_to_tensor_dtype(values.dtype)
            except (KeyError, ValueError, TypeError):
                pass
        skeleton.graph.input.append(onnx.helper.make_tensor_value_info(const.name, elem_type, list(shape)))


def written_bytes(skeleton: onnx.ModelProto, consts: list[ConstTensor],
                  edit_head: Callable[[onnx.ModelProto], None] | None = None) -> int:
    """The size `export.writer.write_model` gives this model written in one file, to within the
    alignment padding of tensors over 1 MiB (at most a page each); `edit_head` edits a copy of
    the model's fields but its graph (metadata the export adds) before it is measured."""
    head = copy_model(skeleton, graph=False)  # `skeleton` stays as given
    if edit_head is not None:
        edit_head(head)
    graph = head.ByteSize() + 1 + len(padded_varint(0)) + byte_size(skeleton.graph)
    return graph + sum(initializer_record_bytes(c) for c in consts)


def _type_outputs(skeleton: onnx.ModelProto, model: onnx.ModelProto, plan: PrunePlan,
                  known_types: KnownTypes | None = None, infer: bool = True) -> None:
    """Give the pruned graph's untyped outputs their types: the known ones (`known_types`), the
    rest by shape inference of the pruned graph (an early exit of a 23k-node decoder infers ~3k
    nodes, not all of them) with its weights' headers (and the small ones whole: shape arguments)
    and the declarations of the parameter inputs a checkpoint fills. Known types spare the app's
    worker that inference: it holds the GIL (the window frozen as long). `infer` False: the known types only."""
    for vi in skeleton.graph.output if known_types is not None else ():
        known = None if vi.HasField("type") else known_types(vi.name)
        if known is not None:
            vi.type.CopyFrom(known)
    untyped = [i for i, vi in enumerate(skeleton.graph.output) if not vi.HasField("type") or not complete_type(vi.type)]
    if not untyped or not infer:
        return
    light = onnx.ModelProto()
    light.CopyFrom(skeleton)  # weight-free: the pruned graph only
    needed = set(plan.initializers)
    add_light_initializers(light, (t for t in model.graph.initializer if t.name in needed))
    filled = set(plan.parameter_inputs)
    light.graph.input.extend(vi for vi in model.graph.input if vi.name in filled)
    infos = infer_value_info(light)
    for i in untyped:
        found = infos.get(skeleton.graph.output[i].name)
        if found is not None and found.HasField("type") and (
                not skeleton.graph.output[i].HasField("type") or complete_type(found.type)):
            skeleton.graph.output[i].CopyFrom(found)  # a declared rank-less type only for a complete one


def _type_cut_inputs(skeleton: onnx.ModelProto, model: onnx.ModelProto, plan: PrunePlan,
                     params: ParameterSet | None, known_types: KnownTypes | None = None, infer: bool = True) -> None:
    """Give the cut inputs (`plan.cut_inputs`) the types they have in `model`: the known ones, the
    rest typed as outputs of `model` pruned to them would be (`_type_outputs`: shape inference of
    the part above the cut). Types still unknown are left for one run (`export.output_types`)."""
    if not plan.cut_inputs:
        return
    by_name = {vi.name: vi for vi in skeleton.graph.input}
    untyped = [n for n in plan.cut_inputs if not complete_type(by_name[n].type)]
    if not untyped:
        return
    above = plan_prune(model, untyped, set(params) if params is not None else plan.parameter_inputs)
    probe = copy_without_initializers(model)
    release(prune(probe, above).changes)
    _type_outputs(probe, model, above, known_types, infer=infer)
    for vi in probe.graph.output:
        if vi.HasField("type") and complete_type(vi.type):
            by_name[vi.name].type.CopyFrom(vi.type)
