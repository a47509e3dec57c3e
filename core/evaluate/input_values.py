"""Values for generated inputs: random where any value will do, the model's own where it checks.

Contract:
- `generate(specs, shapes, count, seed, values)` makes `count` deterministic feeds of the given
  shapes: floats standard normal, booleans fair coins, index-like ints in their table's range,
  masks ones, a scalar int 1 (a count, a flag, a step), other ints 0/1; `values` (input name ->
  value) fills an input with one value instead. Sizes are checked first (`check_generated_size`,
  budgets.py: per input and for all feeds together): `OnnxportError` before any allocation.
- `value_choices(model, specs)`: for a small input the model compares with constants - silero-vad
  runs `If(Equal(sr, 16000))` and only 16000 and 8000 are sample rates it knows - the constants
  it is compared with (`Equal`, `Greater`, `Less`, ...; through Cast/Identity/Squeeze/Unsqueeze/
  Reshape; in `If`/`Loop`/`Scan` bodies too), in graph order, then 1. The heuristic: a model that
  branches on an input's value names the values it expects next to the comparison; the first-run
  probe (first_run.py) tries them in order and keeps the first one ONNX Runtime runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.evaluate.input_specs import InputSpec
from onnxport.core.io.shape_limits import shape_problem
from onnxport.core.util.budgets import GENERATED_INPUT_MAX, GENERATED_TOTAL_MAX, declared_bytes, human_bytes
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.shapes import numel

MAX_CHOICES = 4
_COMPARE = {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"}
_FOLLOW = {"Cast", "Identity", "Squeeze", "Unsqueeze", "Reshape", "Flatten"}


def generate(specs: list[InputSpec], shapes: Mapping[str, tuple[int, ...]], count: int = 1, *, seed: int = 0,
             values: Mapping[str, object] | None = None) -> list[dict[str, np.ndarray]]:
    values = values or {}
    check_generated_size(specs, shapes, count)
    rng = np.random.default_rng(seed)
    return [{spec.name: _array(spec, shapes[spec.name], rng, values.get(spec.name)) for spec in specs}
            for _ in range(count)]


def check_generated_size(specs: list[InputSpec], shapes: Mapping[str, tuple[int, ...]], count: int = 1) -> None:
    """`OnnxportError` when the inputs of `count` feeds of `shapes` are over the budgets (module docstring)."""
    total = 0
    for spec in specs:
        if any(int(d) < 0 for d in shapes[spec.name]):
            raise OnnxportError(f"input '{spec.name}': {list(shapes[spec.name])} has a negative size")
        nbytes = declared_bytes(shapes[spec.name], spec.dtype.itemsize)
        if nbytes > GENERATED_INPUT_MAX:
            raise OnnxportError(f"input '{spec.name}': {list(shapes[spec.name])} is too large to generate "
                                f"({human_bytes(nbytes)}, at most {human_bytes(GENERATED_INPUT_MAX)} per input); "
                                "give smaller sizes (--shape, --dim) or inputs from a file")
        problem = shape_problem(shapes[spec.name], spec.dtype.itemsize)  # [0, 2^62]: no bytes, yet no array
        if problem is not None:
            raise OnnxportError(f"input '{spec.name}' {problem}; give other sizes (--shape, --dim) or inputs from a file")
        total += nbytes
    if total * max(count, 1) > GENERATED_TOTAL_MAX:
        shown = ", ".join(f"{s.name}{list(shapes[s.name])}" for s in specs[:4]) + (", ..." if len(specs) > 4 else "")
        raise OnnxportError(f"inputs {shown}: {human_bytes(total)} per feed, {human_bytes(total * max(count, 1))} for "
                            f"{count}: too large to generate (at most {human_bytes(GENERATED_TOTAL_MAX)} in all); "
                            "give smaller sizes (--shape, --dim) or inputs from a file")


def _array(spec: InputSpec, shape: tuple[int, ...], rng: np.random.Generator, value) -> np.ndarray:
    dtype = spec.dtype
    if value is not None:
        return np.full(shape, value, dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        if spec.mask:
            return np.ones(shape, dtype)
        if spec.int_range:
            low, high = spec.int_range
            return rng.integers(low, max(high, low + 1), shape).astype(dtype)
        if shape == ():
            return np.ones(shape, dtype)
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    raise OnnxportError(f"cannot generate values for input '{spec.name}' of type {dtype}; provide inputs from a file")


def value_choices(model: onnx.ModelProto, specs: list[InputSpec]) -> dict[str, list]:
    """Input name -> values to try, for inputs of at most one element compared with constants."""
    small = {s.name: s for s in specs if s.shape is not None and all(d == 1 for d in s.shape)
             and s.dtype.kind in "iuf"}
    if not small:
        return {}
    nodes = list(_all_nodes(model.graph))
    constants = _constants(model.graph, nodes)
    out = {}
    for name, spec in small.items():
        derived = _derived(name, nodes)
        found = []
        for node in nodes:
            if node.op_type not in _COMPARE or len(node.input) != 2:
                continue
            a, b = node.input
            other = b if a in derived else a if b in derived else None
            value = constants.get(other) if other is not None else None
            if value is not None and value.size == 1 and np.isfinite(value.reshape(-1)[0]):
                found.append(_as_kind(value.reshape(-1)[0], spec.dtype))
        found = list(dict.fromkeys(found))[:MAX_CHOICES]
        if found:
            out[name] = found + ([1] if 1 not in found else [])
    return out


def _as_kind(value, dtype: np.dtype):
    return int(value) if dtype.kind in "iu" else float(value)


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` and of the bodies of its control-flow nodes, each before its body."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
                yield from _all_nodes(sub)


def _constants(graph: onnx.GraphProto, nodes: list[onnx.NodeProto]) -> dict[str, np.ndarray]:
    """Small constants by name: initializers (of every body too) and Constant nodes' values."""
    out: dict[str, np.ndarray] = {}
    graphs = [graph] + [a.g for n in nodes for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
    for g in graphs:
        for t in g.initializer:
            if numel(t.dims) <= 1 and not t.external_data:
                out[t.name] = numpy_helper.to_array(t)
    for node in nodes:
        if node.op_type != "Constant" or not node.output:
            continue
        for a in node.attribute:
            if a.name == "value" and numel(a.t.dims) <= 1 and not a.t.external_data:
                out[node.output[0]] = numpy_helper.to_array(a.t)
            elif a.name == "value_int":
                out[node.output[0]] = np.array(a.i)
            elif a.name == "value_float":
                out[node.output[0]] = np.array(a.f)
    return out


def _derived(name: str, nodes: list[onnx.NodeProto]) -> set[str]:
    """`name` and the tensors that are only it reshaped or cast."""
    derived = {name}
    for _ in range(4):  # bodies come after their node: a few passes reach what they derive
        before = len(derived)
        for node in nodes:
            if node.op_type in _FOLLOW and node.input and node.input[0] in derived:
                derived.update(o for o in node.output if o)
        if len(derived) == before:
            break
    return derived
