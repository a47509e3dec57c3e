"""Every output of a written model declares its type and rank, as ONNX requires.

Why: `onnx.checker` (and runtimes stricter than ORT) refuse a model whose graph output has no
element type or no shape. An intermediate tensor kept as an output takes its type from the index
or from shape inference (`inference_graph`), but inference cannot follow every graph (a Reshape
to a computed shape, an If whose branches disagree): those outputs are left rank-less.

Contract: `rankless_outputs(graph)` names the outputs lacking a type, or a tensor's element type
and rank, or a sequence/optional's element type. `complete_output_types(graph, label, run_types)` gives those outputs the types `run_types(names)`
returns (one ONNX Runtime run: `evaluate.run_types.types_by_run`, passed in by the front ends, as
the export layer sits below evaluation) and raises `OnnxportError` in one line naming the outputs
whose type is still unknown: a model that `onnx.checker` would refuse is never written, unless
the source declares that output rank-less itself (then it is written as the source declares it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import onnx

from onnxport.core.util.errors import OnnxportError

RunTypes = Callable[[list[str]], "dict[str, onnx.TypeProto]"]  # output names -> types found by a run


def complete_type(vtype: onnx.TypeProto) -> bool:
    """What `onnx.checker` asks of a main graph's output type."""
    kind = vtype.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        tensor = getattr(vtype, kind)
        return bool(tensor.elem_type) and tensor.HasField("shape")
    if kind in ("sequence_type", "optional_type"):
        return getattr(vtype, kind).HasField("elem_type")
    if kind == "map_type":
        return bool(vtype.map_type.key_type) and vtype.map_type.HasField("value_type")
    return kind == "opaque_type"


def rankless_outputs(graph: onnx.GraphProto) -> list[str]:
    """See the module docstring."""
    return [vi.name for vi in graph.output if not vi.HasField("type") or not complete_type(vi.type)]


def complete_output_types(graph: onnx.GraphProto, label: str, run_types: RunTypes | None,
                          source_outputs: Iterable[onnx.ValueInfoProto] = (), cut_inputs: Iterable[str] = ()) -> None:
    """See the module docstring. `source_outputs`: the source's graph outputs; one it declares
    rank-less itself is written as declared when no run finds its type (no worse than the source).
    `cut_inputs`: graph inputs that were intermediate tensors (`prune`), typed the same way."""
    cut = set(cut_inputs)
    missing = rankless_outputs(graph) + rankless_inputs(graph, cut)
    if not missing:
        return
    found = run_types(missing) if run_types is not None else {}
    for vi in list(graph.output) + list(graph.input):
        vtype = found.get(vi.name)
        if vi.name in missing and vtype is not None and complete_type(vtype):
            vi.type.CopyFrom(vtype)
    as_declared = {vi.name for vi in source_outputs if not vi.HasField("type") or not complete_type(vi.type)}
    left = [name for name in rankless_outputs(graph) if name not in as_declared]
    inputs_left = rankless_inputs(graph, cut)
    if left or inputs_left:
        names = [f"output '{n}'" for n in left] + [f"input '{n}'" for n in inputs_left]
        said = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        why = ("and ONNX Runtime could not run the model to find it" if run_types is not None
               else "(no run was allowed to find it)")
        raise OnnxportError(f"{label}: not written: shape inference gives no type or rank for {said} "
                            f"{why}; ONNX requires one", hint="choose another tensor close to it")


def rankless_inputs(graph: onnx.GraphProto, among: set[str]) -> list[str]:
    """The graph inputs `among` lacking a type, or a tensor's element type and rank."""
    return [vi.name for vi in graph.input if vi.name in among and (not vi.HasField("type") or not complete_type(vi.type))]
