"""A model brought down to the opset and IR version an ONNX Runtime release reads.

Contract: `fit_versions(model, target)` returns (model, notes). A model already within the
target's limits is returned as it is (never converted up). A newer ai.onnx opset goes down with
`onnx.version_converter`; the IR version is rewritten to the target's when nothing in the model
needs a newer one (element types, local functions). Every ai.onnx op, subgraphs included, must
exist at the target opset. An op the converter has no adapter for, whose older version takes the
same inputs and attributes (only its types grew, e.g. ConstantOfShape 20 -> 9), is relabelled when
that version allows the types the model gives it (inferred). Nodes of domain `ai.onnx` (ONNX's other
name for its default domain, which the converter does not know) are moved to ''. Last, every node is
checked at the opset the result declares (target_check.py). What cannot be expressed is refused in
one line naming the op or the node (or the type, or the domain): `OnnxportError`, never another.
"""

from __future__ import annotations

import re

import onnx
from onnx import version_converter

from onnxport.core.deploy.target_check import target_problem
from onnxport.core.deploy.targets import Target
from onnxport.core.util.errors import OnnxportError

_DEFAULT = ("", "ai.onnx")
_ML = "ai.onnx.ml"
# element types and the IR version that introduced them (onnx.proto: float8 in IR 9, int4 in 10...)
_TYPE_IR = {17: 9, 18: 9, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 12, 25: 13, 26: 13}
_LOCAL_FUNCTIONS_IR = 8
_HELD = "onnxport.held"  # a private domain the converter leaves alone


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


def _same_signature(op: str, old: int, new: int) -> bool:
    """Whether `op` at opset `new` takes what it takes at `old` (inputs, outputs, attributes), so
    that only its type constraints can differ (the checker then checks the types the model uses)."""
    a, b = onnx.defs.get_schema(op, old, ""), onnx.defs.get_schema(op, new, "")
    def params(schema):
        return ([(i.name, i.option) for i in schema.inputs], [(o.name, o.option) for o in schema.outputs],
                sorted(schema.attributes))
    return params(a) == params(b)


def _hold(model: onnx.ModelProto, ops: set[str], domain_from: tuple[str, ...], domain_to: str) -> None:
    for node in _nodes(model):
        if node.op_type in ops and node.domain in domain_from:
            node.domain = domain_to


def _types(model: onnx.ModelProto) -> dict[str, str]:
    """Value name -> its type as ONNX spells it ('tensor(float)'), over every graph, after shape
    inference (best effort)."""
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        pass
    types = {}
    for graph in _graphs(model.graph):
        for t in graph.initializer:
            types[t.name] = _type_str(t.data_type)
        for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                types[vi.name] = _type_str(vi.type.tensor_type.elem_type)
    return types


def _type_str(elem_type: int) -> str:
    """ONNX's spelling in type constraints: FLOAT -> 'tensor(float)', FLOAT8E4M3FN -> 'tensor(float8e4m3fn)'."""
    return f"tensor({onnx.TensorProto.DataType.Name(elem_type).lower()})"


def _type_outside(model: onnx.ModelProto, ops: set[str], opset: int) -> tuple[str, str] | None:
    """(op, type) for a held node given a type its opset-`opset` schema does not allow, else None."""
    types = _types(model)
    for node in _nodes(model):
        if node.op_type not in ops or node.domain not in _DEFAULT:
            continue
        schema = onnx.defs.get_schema(node.op_type, opset, "")
        allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
        formal = [(p.type_str, n) for p, n in zip(schema.inputs, node.input)] + \
                 [(p.type_str, n) for p, n in zip(schema.outputs, node.output)]
        for type_str, name in formal:
            got = types.get(name)
            if name and got and type_str in allowed and got not in allowed[type_str]:
                return node.op_type, f"{got} ('{name}')"
    return None


def _convert(model: onnx.ModelProto, opset: int, target: int, where: str) -> tuple[onnx.ModelProto, set[str]]:
    """onnx.version_converter down to `target`. An op it has no adapter for, whose older version
    takes the same inputs and attributes, is held out of its way (in a private domain) and put back
    at the target opset if that version allows the model's types for it; else the one-line refusal
    naming the op."""
    held: set[str] = set()
    work = model
    while True:
        try:
            converted = version_converter.convert_version(work, target)
            break
        except (RuntimeError, ValueError, onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            op, why = _converter_refusal(text)
            refusal = OnnxportError(f"{f'op {op}' if op else 'the model'} cannot be converted to opset {target} "
                                    f"for {where}: {why}")
            if not op or op in held or "no adapter" not in why or not _same_signature(op, opset, target):
                raise refusal from None
            held.add(op)
            if work is model:
                work = onnx.ModelProto()
                work.CopyFrom(model)
                work.opset_import.append(onnx.helper.make_opsetid(_HELD, 1))
            _hold(work, {op}, _DEFAULT, _HELD)
    if held:
        _hold(converted, held, (_HELD,), "")
        del converted.opset_import[:]
        converted.opset_import.extend([o for o in work.opset_import if o.domain != _HELD and o.domain not in _DEFAULT]
                                      + [onnx.helper.make_opsetid("", target)])
        wrong = _type_outside(converted, held, target)
        if wrong:
            raise OnnxportError(f"op {wrong[0]} cannot be converted to opset {target} for {where}: onnx.version_converter "
                                f"has no adapter for it, and its opset-{target} version does not take {wrong[1]}")
    return converted, held


def _default_domain(model: onnx.ModelProto) -> list[str]:
    """Nodes of domain 'ai.onnx' moved to '' (the same operators), with the opset import: a note, or
    none when there are none. Two different versions declared for the two names are refused."""
    aliased = [n for g in [model.graph.node] + [f.node for f in model.functions] for n in _all_nodes(g)
               if n.domain == "ai.onnx"]
    for imports in [model.opset_import] + [f.opset_import for f in model.functions]:
        versions = {o.domain: o.version for o in imports if o.domain in _DEFAULT}
        if len(set(versions.values())) > 1:
            raise OnnxportError(f"the model declares ai.onnx opset {versions['ai.onnx']} and opset {versions['']} for "
                                "the default domain '': one domain, two versions")
        if "ai.onnx" in versions:
            kept = [o for o in imports if o.domain not in _DEFAULT]
            del imports[:]
            imports.extend(kept + [onnx.helper.make_opsetid("", versions["ai.onnx"])])
    for node in aliased:
        node.domain = ""
    return [f"{len(aliased)} node(s) of domain 'ai.onnx' moved to the default domain ''"] if aliased else []


def _all_nodes(nodes):
    for node in nodes:
        yield node
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                yield from _all_nodes(sub.node)


def fit_versions(model: onnx.ModelProto, target: Target) -> tuple[onnx.ModelProto, list[str]]:
    """See the module docstring."""
    assert target.max_opset is not None and target.max_ir is not None and target.max_ml_opset is not None
    where = f"ONNX Runtime {target.name[4:]} (opset <= {target.max_opset}, IR <= {target.max_ir})"
    notes = _default_domain(model)
    ml = opset_of(model, (_ML,))
    if ml is not None and ml > target.max_ml_opset:
        raise OnnxportError(f"the model uses ai.onnx.ml opset {ml}; {where} reads ai.onnx.ml <= {target.max_ml_opset}")
    opset = opset_of(model)
    if opset is not None and opset > target.max_opset:
        op = missing_op(model, target.max_opset)
        if op is not None:
            raise OnnxportError(f"op {op} cannot be expressed at opset {target.max_opset}: it does not exist "
                                f"before opset {onnx.defs.get_schema(op, opset, '').since_version}; {where} cannot run it")
        model, held = _convert(model, opset, target.max_opset, where)
        notes.append(f"opset {opset} -> {target.max_opset} (onnx.version_converter)")
        if held:
            notes.append(f"{', '.join(sorted(held))} relabelled to opset {target.max_opset}: onnx.version_converter has "
                         "no adapter for it, and its older version takes the same inputs, attributes and the types used")
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
    problem = target_problem(model)
    if problem is not None:
        raise OnnxportError(f"{problem}; {where} cannot run it")
    return model, notes
