"""Which inputs and outputs of an ONNX node carry its float precision, read from the op's schema.

Why: a float16 converter must know, per slot, whether a tensor has to follow the node into float16
(`T` of `Add`, `Conv`, `Clip`'s bounds...), may be read in whatever type it has (`Shape`'s input,
`Cast`'s input, `Resize`'s `roi`), or has a declared type of its own (`Resize`'s `scales`,
`LayerNormalization`'s `Mean`). Guessing by op name is what sent ONNX Runtime's converter wrong
on mixed-type ops; the schema says it exactly.

Contract: `node_slots(node, opset)` returns a `Slots` (a class per input and per output:
FOLLOW, FREE, FIXED, or ATTR for outputs whose type an attribute sets; `half_ok` False when the
node cannot run in float16: no slot that can hold float16, or an attribute-typed output other than
Cast's and ConstantOfShape's), or None for a node without a standard schema (not an ONNX-domain
op, or unknown at that opset): all its float tensors stay float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import onnx
from onnx import defs

FOLLOW, FREE, FIXED, ATTR = "follow", "free", "fixed", "attr"
_HALF, _FLOAT = "tensor(float16)", "tensor(float)"
ATTR_TYPED = {"Cast", "ConstantOfShape"}  # outputs typed by an attribute the converter rewrites
_VARIADIC = defs.OpSchema.FormalParameterOption.Variadic


@dataclass(frozen=True)
class Slots:
    inputs: tuple[str, ...]  # class of each formal input; the last repeats for variadic inputs
    outputs: tuple[str, ...]
    half_ok: bool

    def input(self, index: int) -> str:
        return self.inputs[min(index, len(self.inputs) - 1)] if self.inputs else FIXED

    def output(self, index: int) -> str:
        return self.outputs[min(index, len(self.outputs) - 1)] if self.outputs else FIXED


def node_slots(node: onnx.NodeProto, opset: int) -> Slots | None:
    if node.domain not in ("", "ai.onnx"):
        return None
    return _schema_slots(node.op_type, opset)


@lru_cache(maxsize=512)
def _schema_slots(op_type: str, opset: int) -> Slots | None:
    try:
        schema = defs.get_schema(op_type, opset, "")
    except Exception:  # noqa: BLE001 - onnx raises SchemaError (a RuntimeError subclass) for unknown ops
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    in_params = [p.type_str for p in schema.inputs]
    out_params = [p.type_str for p in schema.outputs]

    def can_be_half(param: str) -> bool:
        return param in allowed and {_HALF, _FLOAT} <= allowed[param]

    inputs = []
    for i, param in enumerate(in_params):
        shared = in_params.count(param) > 1 or param in out_params or (
            schema.inputs[i].option == _VARIADIC)
        inputs.append((FOLLOW if shared else FREE) if can_be_half(param) else FIXED)
    outputs = []
    half_ok = True
    for param in out_params:
        if param not in allowed:
            outputs.append(FIXED)  # a declared type such as tensor(float)
        elif param not in in_params:
            half_ok = half_ok and op_type in ATTR_TYPED  # RandomNormal, EyeLike...: typed by an attribute
            outputs.append(ATTR if op_type in ATTR_TYPED else FIXED)
        else:
            outputs.append(FOLLOW if can_be_half(param) else FIXED)
    half_ok = half_ok and (FOLLOW in inputs or FOLLOW in outputs or ATTR in outputs)
    return Slots(tuple(inputs), tuple(outputs), half_ok)
