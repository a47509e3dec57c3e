"""A model brought down to the opset and IR version an ONNX Runtime release reads.

Contract: `fit_versions(model, target)` returns (model, notes). A model already within the
target's limits is returned as it is (never converted up). A newer ai.onnx opset goes down with
`onnx.version_converter`; the IR version is rewritten to the target's when nothing in the model
needs a newer one (element types, local functions). Every ai.onnx op, subgraphs included, must
exist at the target opset. What cannot be expressed is refused in one line naming the op (or the
type, or the domain): `OnnxportError`.
"""

from __future__ import annotations

import re

import onnx
from onnx import version_converter

from onnxport.core.deploy.targets import Target
from onnxport.core.util.errors import OnnxportError

_DEFAULT = ("", "ai.onnx")
_ML = "ai.onnx.ml"
# element types and the IR version that introduced them (onnx.proto: float8 in IR 9, int4 in 10...)
_TYPE_IR = {17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 12, 25: 13, 26: 13}
_LOCAL_FUNCTIONS_IR = 8


def opset_of(model: onnx.ModelProto, domains: tuple[str, ...] = _DEFAULT) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in domains), None)


def _graphs(graph: onnx.GraphProto):
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _graphs(g)


def _nodes(model: onnx.ModelProto):
    for graph in _graphs(model.graph):
        yield from graph.node


def missing_op(model: onnx.ModelProto, opset: int) -> str | None:
    """The first ai.onnx op of the model with no definition at `opset` (None when all have one)."""
    for node in _nodes(model):
        if node.domain in _DEFAULT:
            try:
                onnx.defs.get_schema(node.op_type, opset, "")
            except onnx.defs.SchemaError:
                return node.op_type
    return None


def _elem_types(model: onnx.ModelProto):
    for graph in _graphs(model.graph):
        for t in graph.initializer:
            yield t.data_type
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            if vi.type.HasField("tensor_type"):
                yield vi.type.tensor_type.elem_type
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    yield attr.t.data_type
                elif attr.name == "to" and attr.type == onnx.AttributeProto.INT:
                    yield attr.i


def _converter_refusal(message: str) -> tuple[str, str]:
    """(op, why) from onnx.version_converter's assertion text."""
    match = re.search(r"No Previous Version of (\w+)", message)
    if match:
        return match.group(1), "it has no earlier version"
    match = re.search(r"No Adapter (To|From) Version \$?(\d+) for (\w+)", message)
    if match:
        return match.group(3), f"onnx.version_converter has no adapter {match.group(1).lower()} opset {match.group(2)} for it"
    match = re.search(r"DataType \((\d+)\) of Input or Output of operator '(\w+)' is unallowed for Opset Version (\d+)", message)
    if match:
        name = onnx.TensorProto.DataType.Name(int(match.group(1))) if int(match.group(1)) in onnx.TensorProto.DataType.values() else match.group(1)
        return match.group(2), f"its type {name} does not exist at opset {match.group(3)}"
    match = re.search(r"for (?:op(?:erator)?\s+)?(\w+)\s*$", message)
    why = re.sub(r"^\S+:\d+: \w+: (Assertion `false` failed: )?", "", message)
    return (match.group(1) if match else ""), why


def fit_versions(model: onnx.ModelProto, target: Target) -> tuple[onnx.ModelProto, list[str]]:
    """See the module docstring."""
    assert target.max_opset is not None and target.max_ir is not None and target.max_ml_opset is not None
    where = f"ONNX Runtime {target.name[4:]} (opset <= {target.max_opset}, IR <= {target.max_ir})"
    notes: list[str] = []
    ml = opset_of(model, (_ML,))
    if ml is not None and ml > target.max_ml_opset:
        raise OnnxportError(f"the model uses ai.onnx.ml opset {ml}; {where} reads ai.onnx.ml <= {target.max_ml_opset}")
    opset = opset_of(model)
    if opset is not None and opset > target.max_opset:
        op = missing_op(model, target.max_opset)
        if op is not None:
            raise OnnxportError(f"op {op} cannot be expressed at opset {target.max_opset}: it does not exist "
                                f"before opset {onnx.defs.get_schema(op, opset, '').since_version}; {where} cannot run it")
        try:
            model = version_converter.convert_version(model, target.max_opset)
        except (RuntimeError, ValueError, onnx.checker.ValidationError) as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            op, why = _converter_refusal(text)
            named = f"op {op}" if op else "the model"
            raise OnnxportError(f"{named} cannot be converted to opset {target.max_opset} for {where}: {why}") from None
        notes.append(f"opset {opset} -> {target.max_opset} (onnx.version_converter)")
    else:
        notes.append(f"opset {opset} kept (ONNX Runtime {target.name[4:]} reads up to {target.max_opset})")
    if model.ir_version > target.max_ir:
        newer = sorted({t for t in _elem_types(model) if _TYPE_IR.get(t, 0) > target.max_ir})
        if newer:
            name = onnx.TensorProto.DataType.Name(newer[0])
            raise OnnxportError(f"type {name} needs IR version {_TYPE_IR[newer[0]]}; {where} reads IR <= {target.max_ir}")
        if model.functions and target.max_ir < _LOCAL_FUNCTIONS_IR:
            raise OnnxportError(f"the model's local functions need IR version 8; {where} reads IR <= {target.max_ir}")
        notes.append(f"IR version {model.ir_version} -> {target.max_ir}")
        model.ir_version = target.max_ir
    else:
        notes.append(f"IR version {model.ir_version} kept")
    return model, notes
