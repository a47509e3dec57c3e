"""Output-by-output comparison of a model against its reference, accumulated batch by batch.

Contract: `OutputStats.update(got, want)` folds one batch in (float64 sums, so memory is one batch);
`OutputStats.result(thresholds)` gives an `OutputComparison`: max/mean abs diff, cosine, relative
L2 error, argmax agreement over the last axis (float outputs with more than one class), NaN/Inf
counts, the spread of per-sample cosines (rows along axis 0) and whether it passes `Thresholds`.
Figures cover the finite values; a NaN or Inf on either side is never a pass (`non_finite_reason`,
the one rule of every verdict): an all-NaN reference validates nothing (its cosine is NaN, not 1).

Pass criteria depend on the output's kind (`output_kinds`): every output must reach the cosine
bound; a classifier's output (a Softmax/LogSoftmax result, or named like logits/probabilities/
classes) must also pick the same class: cosine alone passes a two-class classifier that flips one
answer in four, since a flip between two close logits barely moves the vector.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

import numpy as np
import onnx

VALUES, CLASSES = "values", "classes"
_CLASS_OPS = {"Softmax", "LogSoftmax"}
_CLASS_NAME = re.compile(r"logit|prob|class|label|softmax", re.IGNORECASE)
_PASS_THROUGH = {"Identity", "Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"}
MAX_SAMPLES = 100_000  # per-sample cosines kept per output (bounded memory)
_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}


@dataclass(frozen=True)
class Thresholds:
    """When a comparison passes. `rel_max_abs_diff` bounds max|diff| by that times max(1, max|ref|)."""

    min_cosine: float = 0.99
    max_abs_diff: float | None = None
    rel_max_abs_diff: float | None = None
    min_argmax_agreement: float | None = None  # on every output with classes
    classifier_argmax: float | None = None  # on outputs of kind CLASSES only

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


# Same precision (an export against its eval graph, fp32 against fp32): near bit-exact.
EXACT = Thresholds(min_cosine=0.99999, rel_max_abs_diff=1e-4)
# Quantized or float16 against float32: the default accuracy target.
LOSSY = Thresholds(min_cosine=0.99, classifier_argmax=0.99)


def lossy(target: float) -> Thresholds:
    """The accuracy target `target` as criteria: cosine per output, argmax agreement per classifier output."""
    return Thresholds(min_cosine=target, classifier_argmax=target)


def output_kinds(model: onnx.ModelProto) -> dict[str, str]:
    """CLASSES or VALUES per graph output (see the module docstring)."""
    producer = {o: n for n in model.graph.node for o in n.output if o}
    kinds = {}
    for out in model.graph.output:
        t = out.type.tensor_type
        dims = list(t.shape.dim) if t.HasField("shape") else None
        single = dims is not None and (not dims or (dims[-1].HasField("dim_value") and dims[-1].dim_value == 1))
        if (t.elem_type and t.elem_type not in _FLOATS) or single:
            kinds[out.name] = VALUES
            continue
        node, name = producer.get(out.name), out.name
        while node is not None and node.op_type in _PASS_THROUGH and node.input:
            node = producer.get(node.input[0])
        by_op = node is not None and node.op_type in _CLASS_OPS
        kinds[out.name] = CLASSES if by_op or _CLASS_NAME.search(name) else VALUES
    return kinds


@dataclass
class OutputComparison:
    name: str
    shape: list[int] | None
    reference_shape: list[int] | None
    max_abs_diff: float
    mean_abs_diff: float
    cosine: float
    rel_l2_error: float
    argmax_agreement: float | None
    reference_max_abs: float
    nan_mismatches: int
    passed: bool
    reason: str = ""
    kind: str = VALUES
    samples: dict | None = None  # per-sample cosine spread (rows along axis 0): count, min, p5, mean
    reference_non_finite: int = 0  # NaN/Inf values in the reference's output

    def to_dict(self) -> dict:
        return {k: _finite(v) for k, v in asdict(self).items()}

    def spread_line(self) -> str:
        s = self.samples
        return "" if not s else (f"per sample ({s['count']}): min {s['min']:.4f}, p5 {s['p5']:.4f}, "
                                 f"mean {s['mean']:.4f}")


def _finite(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


@dataclass
class OutputStats:
    name: str
    kind: str = VALUES
    count: int = 0
    sum_abs: float = 0.0
    max_abs: float = 0.0
    dot: float = 0.0
    got_sq: float = 0.0
    want_sq: float = 0.0
    diff_sq: float = 0.0
    want_max_abs: float = 0.0
    argmax_same: int = 0
    argmax_total: int = 0
    nan_mismatches: int = 0  # values where exactly one side, or both differently, are NaN/Inf
    reference_non_finite: int = 0
    values: int = 0  # values compared, finite or not
    shapes: list[tuple[list[int], list[int]]] = field(default_factory=list)
    shape_error: str = ""
    sample_cosines: list[float] = field(default_factory=list)

    def update(self, got: np.ndarray, want: np.ndarray) -> None:
        if isinstance(got, list) or isinstance(want, list) or got is None or want is None:
            self._update_items(got, want)  # a sequence (list) or an empty optional (None)
            return
        got, want = np.asarray(got), np.asarray(want)
        self.shapes.append((list(got.shape), list(want.shape)))
        if got.shape != want.shape:
            self.shape_error = self.shape_error or f"shape {list(got.shape)} != reference {list(want.shape)}"
            return
        self._update_values(got, want)
        if got.ndim >= 2 and len(self.sample_cosines) < MAX_SAMPLES:
            self.sample_cosines += _row_cosines(got, want)[: MAX_SAMPLES - len(self.sample_cosines)]

    def spread(self) -> dict | None:
        c = np.array(self.sample_cosines, np.float64)
        if c.size == 0:
            return None
        return {"count": int(c.size), "min": round(float(c.min()), 6), "p5": round(float(np.percentile(c, 5)), 6),
                "mean": round(float(c.mean()), 6)}

    def _update_items(self, got, want) -> None:
        """Sequence outputs compare item by item; a different length (or an empty optional on one
        side only) is a shape error, as a different shape is."""
        def size(v) -> str:
            return "none" if v is None else f"{len(v)} items" if isinstance(v, list) else f"a tensor {list(np.shape(v))}"
        if type(got) is not type(want) or (isinstance(got, list) and len(got) != len(want)):
            self.shape_error = self.shape_error or f"{size(got)} != reference {size(want)}"
            return
        for g, w in zip(got or [], want or [], strict=True):
            self.update(g, w)

    def _update_values(self, got: np.ndarray, want: np.ndarray) -> None:
        g = got.astype(np.float64, copy=False).reshape(-1)
        w = want.astype(np.float64, copy=False).reshape(-1)
        g_bad, w_bad = ~np.isfinite(g), ~np.isfinite(w)
        self.values += g.size
        if g_bad.any() or w_bad.any():
            same_special = g_bad & w_bad & ((g == w) | (np.isnan(g) & np.isnan(w)))
            self.nan_mismatches += int(((g_bad | w_bad) & ~same_special).sum())
            self.reference_non_finite += int(w_bad.sum())
            ok = ~(g_bad | w_bad)
            g, w = g[ok], w[ok]
        diff = np.abs(g - w)
        self.count += g.size
        if g.size:
            self.sum_abs += float(diff.sum())
            self.max_abs = max(self.max_abs, float(diff.max()))
            self.want_max_abs = max(self.want_max_abs, float(np.abs(w).max()))
        self.dot += vector_dot(g, w)
        self.got_sq += vector_dot(g, g)
        self.want_sq += vector_dot(w, w)
        self.diff_sq += vector_dot(diff, diff)
        if want.dtype.kind == "f" and want.ndim >= 1 and want.shape[-1] > 1 and want.size:
            finite_rows = np.isfinite(got).all(axis=-1) & np.isfinite(want).all(axis=-1)
            same = (np.argmax(got, axis=-1) == np.argmax(want, axis=-1))[finite_rows]
            self.argmax_same += int(same.sum())
            self.argmax_total += same.size

    @property
    def cosine(self) -> float:
        """Over the finite values; NaN when there were values and none of them was finite."""
        if self.count == 0 and self.values:
            return math.nan
        if self.got_sq == 0.0 and self.want_sq == 0.0:
            return 1.0
        if self.got_sq == 0.0 or self.want_sq == 0.0:
            return 0.0
        return self.dot / math.sqrt(self.got_sq * self.want_sq)

    def result(self, t: Thresholds) -> OutputComparison:
        got_shape, want_shape = self.shapes[0] if self.shapes else (None, None)
        rel_l2 = math.sqrt(self.diff_sq / self.want_sq) if self.want_sq else (0.0 if self.diff_sq == 0 else math.inf)
        argmax = self.argmax_same / self.argmax_total if self.argmax_total else None
        reasons = []
        if self.shape_error:
            reasons.append(self.shape_error)
        else:
            cosine = self.cosine
            non_finite = non_finite_reason(self.nan_mismatches, self.reference_non_finite, self.values)
            if non_finite:
                reasons.append(non_finite)
            if cosine < t.min_cosine:
                reasons.append(f"cosine {cosine:.6f} < {t.min_cosine}")
            if t.max_abs_diff is not None and self.max_abs > t.max_abs_diff:
                reasons.append(f"max abs diff {self.max_abs:.3g} > {t.max_abs_diff:.3g}")
            if t.rel_max_abs_diff is not None:
                bound = t.rel_max_abs_diff * max(1.0, self.want_max_abs)
                if self.max_abs > bound:
                    reasons.append(f"max abs diff {self.max_abs:.3g} > {bound:.3g}")
            need = t.min_argmax_agreement
            if self.kind == CLASSES and t.classifier_argmax is not None:
                need = max(need or 0.0, t.classifier_argmax)
            if need is not None and argmax is not None and argmax < need:
                reasons.append(f"argmax agreement {argmax:.4f} < {need}"
                               + (" (a classifier's output)" if self.kind == CLASSES else ""))
        return OutputComparison(
            name=self.name, shape=got_shape, reference_shape=want_shape,
            max_abs_diff=self.max_abs, mean_abs_diff=self.sum_abs / self.count if self.count else 0.0,
            cosine=self.cosine if not self.shape_error else 0.0, rel_l2_error=rel_l2,
            argmax_agreement=argmax, reference_max_abs=self.want_max_abs,
            nan_mismatches=self.nan_mismatches, passed=not reasons, reason="; ".join(reasons), kind=self.kind,
            samples=None if self.shape_error else self.spread(), reference_non_finite=self.reference_non_finite,
        )


NOTHING_TO_VALIDATE = "every value of the reference's output is NaN/Inf"  # an output's reason, said whole


def non_finite_reason(differ: int, reference_non_finite: int, values: int) -> str:
    """Why NaN/Inf values deny a pass ('' when there are none): `differ` values where the model's
    and the reference's non-finite values disagree, `reference_non_finite` NaN/Inf values in the
    reference's output, of `values` compared. Matching NaNs are not agreement: nothing was checked."""
    if differ:
        return f"{differ} NaN/Inf value(s) differ from the reference"
    if not reference_non_finite:
        return ""
    if reference_non_finite == values:
        return (f"{NOTHING_TO_VALIDATE} (so is the model's): nothing to validate against; use inputs the "
                "reference computes finite outputs for")
    return (f"{reference_non_finite} of {values} values of the reference's output are NaN/Inf (the model's "
            "match them): those values are not checked; use inputs the reference computes finite outputs for")


def vector_dot(a: np.ndarray, b: np.ndarray) -> float:
    """The dot product of two 1-D float64 arrays, in numpy's own loop, not BLAS: OpenBLAS's threads
    spin against ONNX Runtime's and make a long dot hundreds of times slower (docs/performance.md)."""
    return float(np.einsum("i,i->", a, b))


def _row_cosines(got: np.ndarray, want: np.ndarray) -> list[float]:
    """Cosine of each row along axis 0 (a sample, for batch-first outputs) that has finite values, over them."""
    if got.dtype.kind not in "fc" or not got.size or got.size == got.shape[0]:
        return []  # one value a row: its cosine is 1 (or -1) whatever the error, no spread to show
    g = got.astype(np.float64, copy=False).reshape(got.shape[0], -1)
    w = want.astype(np.float64, copy=False).reshape(want.shape[0], -1)
    ok = np.isfinite(g) & np.isfinite(w)
    g, w = np.where(ok, g, 0.0), np.where(ok, w, 0.0)
    dot, gg, ww = (g * w).sum(1), (g * g).sum(1), (w * w).sum(1)
    both_zero = (gg == 0) & (ww == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = np.where(both_zero, 1.0, np.where((gg == 0) | (ww == 0), 0.0, dot / np.sqrt(gg * ww)))
    return [float(c) for c in cos[ok.any(axis=1)]]  # a row with no finite value has no cosine
