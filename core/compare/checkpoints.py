"""Two parameter files side by side: which parameters moved, and how far.

Contract: `parameter_diff(a, b, tolerance)` compares two `ParameterSet`s (ORT checkpoints, the
legacy folder, safetensors, npz, state_dict) name by name and returns one `ParamChange` per name
of either: status "only_a", "only_b", "shape" (shape or type differ), "changed" (beyond
tolerance, stats.py) or "same"; with max abs, relative L2 and cosine where both hold values.
Values are read piece by piece from the memory-mapped files: memory is one piece, not a model.
Sorted: the most changed first, then the rest by name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxport.core.compare.stats import DEFAULT_TOLERANCE, DiffStats, Tolerance, diff_stats
from onnxport.core.io.parameter_set import ParameterSet, ParamTensor
from onnxport.core.util.errors import NominalCheckpointError
from onnxport.core.util.progress import Reporter

SAME, CHANGED, ONLY_A, ONLY_B, SHAPE = "same", "changed", "only_a", "only_b", "shape"
_ORDER = {CHANGED: 0, SHAPE: 1, ONLY_A: 2, ONLY_B: 3, SAME: 4}


@dataclass
class ParamChange:
    name: str
    status: str
    shape: list[int] | None
    shape_b: list[int] | None
    dtype: str | None
    dtype_b: str | None
    stats: DiffStats | None = None

    def to_dict(self) -> dict:
        out = {"name": self.name, "status": self.status, "shape": self.shape, "dtype": self.dtype}
        if self.shape_b != self.shape or self.dtype_b != self.dtype:
            out["shape_b"], out["dtype_b"] = self.shape_b, self.dtype_b
        if self.stats is not None:
            out.update(self.stats.to_dict())
        else:
            out.update({"max_abs": None, "cosine": None, "rel_l2": None})
        return out


def parameter_diff(a: ParameterSet, b: ParameterSet, tolerance: Tolerance = DEFAULT_TOLERANCE,
                   progress: Reporter | None = None) -> list[ParamChange]:
    """See the module docstring."""
    report = progress or Reporter()
    for side in (a, b):
        if side.nominal:
            raise NominalCheckpointError(f"{', '.join(map(str, side.sources)) or 'a checkpoint'} is nominal: "
                                         "it holds parameter names only, no values to compare")
    names = list(a.params) + [n for n in b.params if n not in a.params]
    changes = []
    for k, name in enumerate(names):
        report.check()
        if k % 64 == 0:
            report(k / max(len(names), 1), f"comparing parameters ({k}/{len(names)})")
        changes.append(_change(name, a.params.get(name), b.params.get(name), tolerance))
    changes.sort(key=lambda c: (_ORDER[c.status], -_rel(c), c.name))
    return changes


def _change(name: str, pa: ParamTensor | None, pb: ParamTensor | None, tol: Tolerance) -> ParamChange:
    shape = list(pa.shape) if pa is not None else None
    shape_b = list(pb.shape) if pb is not None else None
    dtype, dtype_b = (pa.dtype if pa is not None else None), (pb.dtype if pb is not None else None)
    if pa is None or pb is None:
        return ParamChange(name, ONLY_B if pa is None else ONLY_A, shape, shape_b, dtype, dtype_b)
    if shape != shape_b or dtype != dtype_b:
        return ParamChange(name, SHAPE, shape, shape_b, dtype, dtype_b)
    stats = diff_stats(np.asarray(pa.array()).reshape(-1), np.asarray(pb.array()).reshape(-1), pa.shape, pb.shape)
    status = SAME if stats.identical or not tol.departs(stats) else CHANGED
    return ParamChange(name, status, shape, shape_b, dtype, dtype_b, stats)


def _rel(c: ParamChange) -> float:
    v = c.stats.rel_l2 if c.stats is not None else 0.0
    return v if v == v and v != float("inf") else 1e300
