"""Match a model's parameters against a parameter set (checkpoint, state_dict...).

Contract: in, a model graph and a `ParameterSet`; out, a `ParamMatch` that says which parameters
are matched, missing, unexpected or mismatched (shape/dtype), and which are trainable or frozen.
It never loads tensor values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import onnx

from onnxport.core.io.parameter_set import ParameterSet, dtype_name
from onnxport.core.util.errors import CheckpointMismatchError, NominalCheckpointError
from onnxport.core.util.shapes import value_info_shape

# Graph inputs named like these are parameters even when the checkpoint lacks them.
PARAM_NAME = re.compile(r"(\.|^)(weight|bias|running_mean|running_var|num_batches_tracked|gamma|beta)$")


@dataclass
class Mismatch:
    name: str
    expected: str  # "float32[64, 32]"
    got: str


@dataclass
class ParamMatch:
    matched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # the model needs them; the set lacks them
    unexpected: list[str] = field(default_factory=list)  # in the set, not in the model
    mismatched: list[Mismatch] = field(default_factory=list)
    trainable: list[str] = field(default_factory=list)
    frozen: list[str] = field(default_factory=list)
    overridden_initializers: list[str] = field(default_factory=list)  # model initializers the set replaces
    nominal: bool = False

    @property
    def ok(self) -> bool:
        return not self.missing and not self.mismatched and not self.nominal

    def summary(self) -> str:
        parts = [f"{len(self.matched)} matched"]
        if self.trainable or self.frozen:
            parts.append(f"{len(self.trainable)} trainable, {len(self.frozen)} frozen")
        for label, items in (("missing", self.missing), ("unexpected", self.unexpected),
                             ("mismatched", self.mismatched)):
            if items:
                parts.append(f"{len(items)} {label}")
        if self.nominal:
            parts.append("NOMINAL checkpoint (no values)")
        return ", ".join(parts)

    def raise_if_unusable(self) -> None:
        """Raise the user error that stops an export, naming the first offending tensor."""
        if self.nominal:
            raise NominalCheckpointError(
                "the checkpoint is nominal: it holds parameter names only, no trained values",
                hint="export from the checkpoint saved after training",
            )
        if self.mismatched:
            m = self.mismatched[0]
            more = f" (and {len(self.mismatched) - 1} more)" if len(self.mismatched) > 1 else ""
            raise CheckpointMismatchError(
                f"checkpoint does not fit the model: '{m.name}' is {m.got} in the checkpoint "
                f"but the model expects {m.expected}{more}"
            )
        if self.missing:
            more = f" (and {len(self.missing) - 1} more)" if len(self.missing) > 1 else ""
            raise CheckpointMismatchError(
                f"checkpoint does not fit the model: parameter '{self.missing[0]}' is missing{more}"
            )


def _type_text(elem_type: int, shape) -> str:
    dims = ", ".join("?" if d is None else str(d) for d in shape) if shape is not None else "?"
    return f"{dtype_name(elem_type)}[{dims}]"


def _input_shape(vi: onnx.ValueInfoProto) -> tuple | None:
    """The declared shape, symbolic sizes as None (unknown: any size fits)."""
    shape = value_info_shape(vi)
    return None if shape is None else tuple(d if isinstance(d, int) else None for d in shape)


def match_parameters(model: onnx.ModelProto, params: ParameterSet) -> ParamMatch:
    """Compare the graph's parameter slots (graph inputs, initializers) with `params`."""
    result = ParamMatch(nominal=params.nominal)
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    consumed = {i for n in graph.node for i in n.input}
    seen: set[str] = set()
    for vi in graph.input:
        if vi.name in initializers:
            continue  # handled with the initializers below
        seen.add(vi.name)
        tensor = params.params.get(vi.name)
        if tensor is None:
            if PARAM_NAME.search(vi.name) and vi.name in consumed:
                result.missing.append(vi.name)
            continue
        _compare(result, vi.name, vi.type.tensor_type.elem_type, _input_shape(vi), tensor, params.nominal)
    for name, init in initializers.items():
        tensor = params.params.get(name)
        if tensor is None:
            continue
        seen.add(name)
        result.overridden_initializers.append(name)
        _compare(result, name, init.data_type, tuple(init.dims), tensor, params.nominal)
    result.unexpected = [n for n in params.params if n not in seen]
    return result


def _compare(result: ParamMatch, name: str, elem_type: int, shape, tensor, nominal: bool) -> None:
    if tensor.elem_type != elem_type or (
        not nominal
        and shape is not None
        and (len(shape) != len(tensor.shape)
             or any(d is not None and d != t for d, t in zip(shape, tensor.shape)))
    ):
        result.mismatched.append(
            Mismatch(name, _type_text(elem_type, shape), _type_text(tensor.elem_type, tensor.shape))
        )
        return
    result.matched.append(name)
    if tensor.trainable is True:
        result.trainable.append(name)
    elif tensor.trainable is False:
        result.frozen.append(name)
