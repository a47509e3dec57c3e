"""Fixed input shapes for runtimes that want them (an NPU delegate, NNAPI), and the reverse.

Contract: `parse_shape_options(shapes, dims)` reads `--shape INPUT=1x3x224x224` and `--dim NAME=N`
/ `--dim NAME=dynamic` (NAME a symbolic dim of the inputs, `batch` for the batch axis of every
input, or `INPUT:AXIS`); `apply_shapes(model, request)` fixes them with ONNX Runtime's own
onnx_model_utils (make_dim_param_fixed for a named dim, everywhere it appears; an unnamed one,
'?' or -1, is set on its axis), or makes the named axes dynamic,
then drops the stale value_info and infers shapes again (outputs included). A shape that does not
fit the model (unknown input, wrong rank, a fixed size that differs) is one `OnnxportError` line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx
from onnxruntime.tools import onnx_model_utils as ort_utils

from onnxport.core.evaluate.input_shapes import parse_size, parse_sizes
from onnxport.core.evaluate.input_specs import _UNNAMED
from onnxport.core.util.errors import OnnxportError

DYNAMIC = "dynamic"
BATCH = "batch"


@dataclass
class ShapeRequest:
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dims: dict[str, int | str] = field(default_factory=dict)  # name -> size or DYNAMIC

    def __bool__(self) -> bool:
        return bool(self.shapes or self.dims)

    def fixed_sizes(self) -> dict[str, int]:
        return {k: v for k, v in self.dims.items() if isinstance(v, int)}


def parse_shape_options(shapes: list[str] | None = None, dims: list[str] | None = None) -> ShapeRequest:
    request = ShapeRequest()
    for item in shapes or []:
        name, sep, text = item.rpartition("=")
        sizes = parse_sizes(text) if sep and name.strip() else None
        if sizes is None or any(s <= 0 for s in sizes):
            raise OnnxportError("--shape expects INPUT=SIZExSIZE... with positive sizes (whole numbers up to 2^63-1, "
                                f"e.g. x=1x3x224x224), got '{item}'")
        request.shapes[name.strip()] = tuple(sizes)
    for item in dims or []:
        name, sep, text = item.rpartition("=")
        size = DYNAMIC if text.strip().lower() == DYNAMIC else parse_size(text)
        if not sep or not name.strip() or size is None:
            raise OnnxportError("--dim expects NAME=SIZE or NAME=dynamic (a size is a positive whole number up to "
                                f"2^63-1, e.g. batch=1), got '{item}'")
        request.dims[name.strip()] = size
    return request


def _dims(vi: onnx.ValueInfoProto):
    return vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else []


def _show(vi: onnx.ValueInfoProto) -> str:
    return f"{vi.name}[{', '.join(str(d.dim_value) if d.HasField('dim_value') else (d.dim_param or '?') for d in _dims(vi))}]"


def _inputs(graph: onnx.GraphProto) -> dict[str, onnx.ValueInfoProto]:
    weights = {t.name for t in graph.initializer}
    return {vi.name: vi for vi in graph.input if vi.name not in weights}


def _input(graph: onnx.GraphProto, name: str, option: str) -> onnx.ValueInfoProto:
    inputs = _inputs(graph)
    if name not in inputs:
        raise OnnxportError(f"{option}: the model has no input '{name}' (its inputs: "
                            f"{', '.join(_show(v) for v in inputs.values()) or 'none'})")
    if not inputs[name].type.HasField("tensor_type") or not inputs[name].type.tensor_type.HasField("shape"):
        raise OnnxportError(f"{option}: input '{name}' declares no shape to fix")
    return inputs[name]


def _named(d) -> bool:
    """A dim_param that names one size ('?', '-1' and the like name none: two '?' axes differ)."""
    return bool(d.dim_param) and d.dim_param.strip() not in _UNNAMED


def _set_axis(graph: onnx.GraphProto, d, size: int) -> None:
    if _named(d):
        ort_utils.make_dim_param_fixed(graph, d.dim_param, size)  # everywhere that size appears
    else:
        d.Clear()
        d.dim_value = size


def _fix_input(graph: onnx.GraphProto, name: str, sizes: tuple[int, ...]) -> None:
    option = f"--shape {name}={'x'.join(map(str, sizes))}"
    vi = _input(graph, name, option)
    dims = _dims(vi)
    if len(dims) != len(sizes):
        raise OnnxportError(f"{option} does not fit the model: {_show(vi)} has rank {len(dims)}, not {len(sizes)}")
    for axis, (d, size) in enumerate(zip(dims, sizes)):
        if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != size:
            raise OnnxportError(f"{option} does not fit the model: {_show(vi)} has {d.dim_value} on axis {axis}")
    for d, size in zip(dims, sizes):
        if not (d.HasField("dim_value") and d.dim_value > 0):
            _set_axis(graph, d, size)


def _axis(graph: onnx.GraphProto, name: str, option: str) -> tuple[onnx.ValueInfoProto, int] | None:
    """(input, axis) for `INPUT:AXIS`, else None."""
    head, sep, tail = name.rpartition(":")
    if not sep or not tail.isdigit():
        return None
    vi = _input(graph, head, option)
    axis = int(tail)
    if axis >= len(_dims(vi)):
        raise OnnxportError(f"{option} does not fit the model: {_show(vi)} has no axis {axis}")
    return vi, axis


def _params(graph: onnx.GraphProto) -> set[str]:
    return {d.dim_param for vi in _inputs(graph).values() for d in _dims(vi) if _named(d)}


def _fix_dim(graph: onnx.GraphProto, name: str, size: int) -> None:
    option = f"--dim {name}={size}"
    found = _axis(graph, name, option)
    if found is not None:
        vi, axis = found
        sizes = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in _dims(vi)]
        d = _dims(vi)[axis]
        if sizes[axis] is not None and sizes[axis] != size:
            raise OnnxportError(f"{option} does not fit the model: {_show(vi)} has {sizes[axis]} on axis {axis}")
        if sizes[axis] is None:
            _set_axis(graph, d, size)
        return
    if name in _params(graph):
        ort_utils.make_dim_param_fixed(graph, name, size)
        return
    if name == BATCH:
        batched = [vi for vi in _inputs(graph).values() if _dims(vi) and not _dims(vi)[0].HasField("dim_value")
                   or (_dims(vi) and _dims(vi)[0].dim_value <= 0)]
        if batched:
            for vi in batched:
                _set_axis(graph, _dims(vi)[0], size)
            return
    raise OnnxportError(f"{option}: no input dimension is named '{name}' (the inputs: "
                        f"{', '.join(_show(v) for v in _inputs(graph).values()) or 'none'}; an unnamed one is INPUT:AXIS)")


def _make_dynamic(graph: onnx.GraphProto, name: str) -> list[str]:
    option = f"--dim {name}={DYNAMIC}"
    found = _axis(graph, name, option)
    if found is not None:
        vi, axis = found
        targets = [(vi, axis, f"{vi.name}_{axis}")]
    elif name in _params(graph):
        return []  # already dynamic
    elif name == BATCH:
        targets = [(vi, 0, BATCH) for vi in _inputs(graph).values() if _dims(vi)]
    else:
        raise OnnxportError(f"{option}: no input dimension is named '{name}' (give 'batch' or INPUT:AXIS)")
    changed = []
    for vi, axis, param in targets:
        d = _dims(vi)[axis]
        if d.dim_param:
            continue
        old = d.dim_value
        d.Clear()
        d.dim_param = param
        changed.append(f"{vi.name} axis {axis}")
        if axis == 0:  # outputs that carried the same fixed batch follow it
            for out in graph.output:
                od = _dims(out)
                if od and od[0].HasField("dim_value") and od[0].dim_value == old:
                    od[0].Clear()
                    od[0].dim_param = param
    return changed


def infer_again(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop the value_info shapes that no longer hold and infer them again (outputs included)."""
    from onnxport.core.graph.shape_infer import propagate_data

    del model.graph.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=propagate_data(model))
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        return model  # ONNX Runtime infers what it needs when it loads the model
    ort_utils.fix_output_shapes(inferred)
    return inferred


def apply_shapes(model: onnx.ModelProto, request: ShapeRequest) -> tuple[onnx.ModelProto, list[str]]:
    """See the module docstring; returns the model and what was done, in words."""
    if not request:
        return model, []
    graph, notes = model.graph, []
    for name, sizes in request.shapes.items():
        _fix_input(graph, name, sizes)
        notes.append(f"input {name} fixed to {'x'.join(map(str, sizes))}")
    for name, size in request.dims.items():
        if size == DYNAMIC:
            changed = _make_dynamic(graph, name)
            notes.append(f"{name} made dynamic ({', '.join(changed)})" if changed else f"{name} was already dynamic")
        else:
            _fix_dim(graph, name, int(size))
            notes.append(f"dimension {name} fixed to {size}")
    model = infer_again(model)
    notes.append("inputs now " + ", ".join(_show(v) for v in _inputs(model.graph).values()))
    return model, notes
