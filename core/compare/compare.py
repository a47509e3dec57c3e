"""Compare two models or two parameter files: the one call the CLI and the app make.

Contract: `compare(a, b, checkpoints_a=..., checkpoints_b=..., inputs=..., tolerance=..., run=True)`
opens both sides (sides.py) and returns a `CompareReport`: for two models the structure diff
(structure.py) and, with `run`, the numeric one (numeric.py); for two parameter files the
parameter diff (checkpoints.py). A model against a parameter file is an `OnnxportError`.
`differs` is the `--check` verdict: an output (or, without a run, a weight) or a parameter that
departs beyond tolerance, or a graph output one side lacks. Nothing is written.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from onnxport.core.compare.checkpoints import SAME, ParamChange, parameter_diff
from onnxport.core.compare.numeric import EXPOSED_BYTES, NumericDiff, numeric_diff
from onnxport.core.compare.sides import ModelSide, ParamSide, open_side
from onnxport.core.compare.stats import DEFAULT_TOLERANCE, Tolerance
from onnxport.core.compare.structure import StructureDiff, structure_diff
from onnxport.core.evaluate.feeds import FeedsLike
from onnxport.core.graph.weightless import weightless_bytes, weightless_copy
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter


@dataclass
class CompareReport:
    a: str
    b: str
    tolerance: Tolerance
    structure: StructureDiff | None = None
    numeric: NumericDiff | None = None
    parameters: list[ParamChange] | None = None
    sides: tuple = ()  # the two opened sides (sides.py), for callers that show more of them

    @property
    def differs(self) -> bool:
        if self.parameters is not None:
            return any(p.status != SAME for p in self.parameters)
        s = self.structure
        if self.numeric is not None:
            lost = bool(s.outputs["removed"] or s.outputs["added"]) and not self.numeric.outputs
            return self.numeric.differs or lost
        return any(self.tolerance.departs(w.stats) for w in s.weights_changed) or bool(
            s.weights_added or s.weights_removed or s.outputs["removed"] or s.outputs["added"])

    def to_dict(self) -> dict:
        out: dict = {"a": self.a, "b": self.b, "tolerance": self.tolerance.to_dict(), "differs": self.differs}
        if self.parameters is not None:
            out["parameters"] = [p.to_dict() for p in self.parameters]
            return out
        out["structure"] = self.structure.to_dict()
        out["numeric"] = self.numeric.to_dict() if self.numeric is not None else None
        return out


def compare(a: str | Path, b: str | Path, *, checkpoints_a: Sequence[str | Path] = (),
            checkpoints_b: Sequence[str | Path] = (), inputs: FeedsLike = None,
            tolerance: Tolerance = DEFAULT_TOLERANCE, run: bool = True, budget: int | None = EXPOSED_BYTES,
            progress: ProgressFn | None = None, cancel: CancelToken | None = None,
            dim_sizes: Mapping[str, int] | None = None,
            shapes: Mapping[str, tuple[int, ...]] | None = None) -> CompareReport:
    """See the module docstring."""
    report = Reporter(progress, cancel)
    report(0.0, f"opening {Path(a).name}")
    side_a = open_side(a, checkpoints_a)
    report.check()
    report(0.02, f"opening {Path(b).name}")
    side_b = open_side(b, checkpoints_b)
    report.check()
    result = CompareReport(str(a), str(b), tolerance, sides=(side_a, side_b))
    if isinstance(side_a, ParamSide) and isinstance(side_b, ParamSide):
        result.parameters = parameter_diff(side_a.params, side_b.params, tolerance, report.sub(0.05, 1.0))
        return result
    if isinstance(side_a, ParamSide) or isinstance(side_b, ParamSide):
        param, model = (side_a, side_b) if isinstance(side_a, ParamSide) else (side_b, side_a)
        which = "a" if param is side_a else "b"
        raise OnnxportError(f"cannot compare a parameter file ({param.path}) with a model ({model.path}): give two "
                            f"models or two parameter files (the model's checkpoint goes in --checkpoint-{which})")
    assert isinstance(side_a, ModelSide) and isinstance(side_b, ModelSide)
    result.structure = structure_diff(side_a, side_b, report.sub(0.05, 0.2))
    if run:
        result.numeric = numeric_diff(side_a, side_b, result.structure, inputs, tolerance, budget=budget,
                                      progress=report.sub(0.2, 1.0), dim_sizes=dim_sizes, shapes=shapes)
    report.finished("compared")
    return result


def compare_in_child(request: dict, data: bytes, channel) -> dict:
    """The app's comparison, run in a child (util/child_call.py's JSON protocol: nothing pickled
    crosses back, the answer is about strangers' files): `request` holds `a`, `b`,
    `checkpoints_a`, `checkpoints_b`; the answer is `{"report": compare(...).to_dict(), "graphs":
    {"a": base64, "b": base64}}`, the graphs weight-free for the preview (none for parameter files)."""
    report = compare(request["a"], request["b"], checkpoints_a=request.get("checkpoints_a", ()),
                     checkpoints_b=request.get("checkpoints_b", ()), progress=channel.progress,
                     cancel=channel.cancel)
    graphs = {}
    if report.structure is not None:
        for key, side in zip("ab", report.sides):
            graph = (weightless_copy(side.model).SerializeToString() if side.model is not None
                     else weightless_bytes(side.path))
            graphs[key] = base64.b64encode(graph).decode("ascii")
    return {"report": report.to_dict(), "graphs": graphs}
