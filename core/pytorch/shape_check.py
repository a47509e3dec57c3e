"""Check a torch export in ONNX Runtime before it is put in place, at every size it claims to take.

Why: torch's TorchScript exporter traces with concrete sizes; a program computing shapes from sizes
(a `.pt2`'s views, a TransformerEncoder's head split) can come out with them baked into constants
(a Reshape to [16, 2, 2, 2]): dynamic axes declared, yet it runs only at the traced shape.

Contract: `check_export(path, declared, feeds_at, torch_at, compare)` runs the model at the example
sizes (`declared`: axis name -> example size) and with each axis alone at another size PyTorch
takes (one more, else twice); outputs' shapes (values with `compare`) are held against
`torch_at(sizes)` (None: PyTorch cannot run them; an axis PyTorch takes at no other size is skipped).
Returns the max |ORT - PyTorch| compared (or None). Raises `BakedAxesError` naming the axes it does
not take, the size it runs at and the op that fixed it (its constant shape), `ExampleShapeError`
when ORT cannot load it or run the example shape, `OnnxportError` when outputs differ from PyTorch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.evaluate.runtime import describe_feed, ort_message, session
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.text import first_line

RELATIVE_TOLERANCE = 1e-3  # |ORT - PyTorch| per output, times max(1, max |PyTorch|): two runtimes' kernels
SHAPE_OPS = ("Reshape", "Expand", "Tile", "ConstantOfShape", "Slice", "Resize")
NODE_NAME = re.compile(r"Name:'([^']*)'")

Feeds = dict[str, np.ndarray]


class ExampleShapeError(OnnxportError):
    """ONNX Runtime cannot load the export or run it at the example shape itself."""


class BakedAxesError(OnnxportError):
    """Dynamic axes the export does not take (`baked`: their names)."""

    def __init__(self, message: str, baked: list[str], hint: str) -> None:
        super().__init__(message, hint=hint)
        self.baked = baked


def declared_axes(model: onnx.ModelProto) -> dict[str, list[tuple[str, int]]]:
    """Each dynamic axis name of the graph inputs -> the (input, axis) places it sizes."""
    found: dict[str, list[tuple[str, int]]] = {}
    for vi in model.graph.input:
        for axis, dim in enumerate(vi.type.tensor_type.shape.dim):
            if dim.dim_param:
                found.setdefault(dim.dim_param, []).append((vi.name, axis))
    return found


def check_export(path: Path, declared: dict[str, int], feeds_at: Callable[[dict[str, int]], Feeds],
                 torch_at: Callable[[dict[str, int]], list[np.ndarray] | None] | None,
                 compare: bool = True) -> float | None:
    """See the module docstring."""
    try:
        sess = session(path, label=path.name, checked=True)
    except OnnxportError as exc:
        raise ExampleShapeError(exc.one_line()) from None
    used = {i.name for i in sess.get_inputs()}
    diffs: list[float] = []

    def run(sizes: dict[str, int]) -> tuple[list[np.ndarray] | None, str | None]:
        feeds = {k: v for k, v in feeds_at(sizes).items() if k in used}
        try:
            return sess.run(None, feeds), None
        except Exception as exc:  # noqa: BLE001 - ORT raises Fail/InvalidArgument/RuntimeException...
            return None, f"on {describe_feed(feeds)}: {first_line(exc, 600)}"

    got, error = run(declared)
    if got is None:
        raise ExampleShapeError(f"{path.name}: the exported model fails in ONNX Runtime at the example shape "
                                f"{ort_message(error or '')}")
    _held(path, got, torch_at(declared) if torch_at else None, compare, declared, diffs)
    baked: list[str] = []
    names: list[str] = []
    culprit = ""
    for name, size in declared.items():
        sizes, expected = _second_size(declared, name, torch_at)
        if sizes is None:
            continue  # PyTorch itself takes no other size tried: the axis is not the export's to keep
        got, error = run(sizes)
        if got is None:
            baked.append(f"{name} = {size}")
            names.append(name)
            culprit = culprit or _culprit(path, {k: v for k, v in feeds_at(sizes).items() if k in used}, error)
            continue
        wrong = _shape_mismatch(got, expected)
        if wrong:
            baked.append(f"{name} = {size}")
            names.append(name)
            culprit = culprit or f"at {name} = {sizes[name]} {wrong}"
            continue
        _held(path, got, expected, compare, sizes, diffs)
    if baked:
        fixed = ", ".join(baked)
        raise BakedAxesError(
            f"{path.name}: the exported model declares dynamic axes it does not take: it runs only at {fixed}"
            f"{'; ' + culprit if culprit else ''}; nothing written", names,
            hint="the exporter traced those sizes into the graph; export with fixed sizes for them "
                 "(--input NAME:DTYPE:DIMS with numbers for those axes)")
    return max(diffs) if diffs else None


def _second_size(declared: dict[str, int], name: str, torch_at) -> tuple[dict[str, int] | None, list | None]:
    """Sizes with `name` alone changed (one more, else twice: an axis may need even sizes) where
    PyTorch runs, with its outputs; without PyTorch, one more. (None, None): it runs at none."""
    size = declared[name]
    if torch_at is None:
        return {**declared, name: size + 1}, None
    for other in (size + 1, 2 * size):
        sizes = {**declared, name: other}
        expected = torch_at(sizes)
        if expected is not None:
            return sizes, expected
    return None, None


def _held(path: Path, got: list[np.ndarray], expected: list[np.ndarray] | None, compare: bool,
          sizes: dict[str, int], diffs: list[float]) -> None:
    """Outputs against PyTorch's: shapes always, float values when `compare` (else refused)."""
    if expected is None:
        return
    wrong = _shape_mismatch(got, expected)
    if wrong:
        raise OnnxportError(f"{path.name}: the exported model's outputs differ from PyTorch's at {_sizes(sizes)}: "
                            f"{wrong}")
    if not compare:
        return
    for i, (g, e) in enumerate(zip(got, expected)):
        if not g.size or not np.issubdtype(e.dtype, np.floating):
            continue
        diff = float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64))))
        scale = max(1.0, float(np.max(np.abs(e))))
        if not np.isfinite(diff) or diff > RELATIVE_TOLERANCE * scale:
            raise OnnxportError(f"{path.name}: output {i} differs from PyTorch's at {_sizes(sizes)}: "
                                f"max |ORT - PyTorch| {diff:.3g}")
        diffs.append(diff)


def _shape_mismatch(got: list[np.ndarray], expected: list[np.ndarray] | None) -> str:
    if expected is None:
        return ""
    for i, (g, e) in enumerate(zip(got, expected)):
        if tuple(g.shape) != tuple(e.shape):
            return f"output {i} has shape {list(g.shape)} where PyTorch gives {list(e.shape)}"
    return ""


def _sizes(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in sizes.items()) or "the example shape"


def _culprit(path: Path, feeds: Feeds, error: str | None) -> str:
    """"Reshape '/Reshape_5' (a fixed target shape [16, 2, 2, 2]) fails there", from ORT's error
    in a session without graph optimizations (whose node names are the model's own)."""
    message = ort_message(error or "")
    try:
        session(path, label=path.name, checked=True, optimize=False).run(None, feeds)
    except OnnxportError:
        pass
    except Exception as exc:  # noqa: BLE001 - ORT's own exception types
        message = ort_message(first_line(exc, 600))
    match = NODE_NAME.search(message)
    model = onnx.load(str(path), load_external_data=False)
    node = next((n for n in model.graph.node if match and n.name == match.group(1)), None)
    if node is None:
        return f"ONNX Runtime: {message[:300]}"
    fixed = _fixed_shape(model, node) if node.op_type in SHAPE_OPS else None
    what = f" (a fixed target shape {fixed})" if fixed is not None else ""
    return f"{node.op_type} '{node.name}'{what} fails there"


def _fixed_shape(model: onnx.ModelProto, node: onnx.NodeProto) -> list[int] | None:
    """The constant shape input of a shape-taking op (its second input), if it is a constant."""
    if len(node.input) < 2 and node.op_type != "ConstantOfShape":
        return None
    name = node.input[0] if node.op_type == "ConstantOfShape" else node.input[1]
    for t in model.graph.initializer:
        if t.name == name and t.data_type == onnx.TensorProto.INT64 and len(t.dims) == 1 and t.dims[0] <= 16:
            return numpy_helper.to_array(t).tolist()
    for n in model.graph.node:
        if n.op_type == "Constant" and name in n.output:
            for attr in n.attribute:
                if attr.name == "value" and attr.t.data_type == onnx.TensorProto.INT64 and len(attr.t.dims) <= 1:
                    return numpy_helper.to_array(attr.t).reshape(-1).tolist()
    return None
