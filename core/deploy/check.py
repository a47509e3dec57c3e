"""Every deploy artifact checked: loaded in ONNX Runtime, run on the source's inputs, compared.

Contract: `check_artifact(source, artifact, onnx_form, ...)` generates inputs that fit both
(evaluate.first_run.fitted_feeds on the source, with `onnx_form`, the artifact's ONNX form, as a
reference, at the sizes the artifact fixed), runs the source and `artifact` (an `.onnx`, or an
`.ort` through an InferenceSession as a minimal build reads it) with like session options (the
optimizers the artifact was made without, `disabled`, off for the source too) and compares every
output. `thresholds` None: bit for bit (max abs diff 0: a float conversion that changes nothing
ORT computes); else those thresholds (compare.EXACT where fixed shapes or other op versions let
ORT fuse or pick kernels otherwise, compare.LOSSY for a quantized or float16 source). `plain`:
both also run with ORT's graph optimizations off, judged alike (what the conversion changed, apart
from the optimizer). `also_batch` (a batch axis made dynamic): the artifact also runs on twice the
batch, and each half must match.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from onnxport.core.evaluate import runtime
from onnxport.core.evaluate.compare import EXACT, OutputStats, Thresholds
from onnxport.core.evaluate.first_run import fitted_feeds
from onnxport.core.evaluate.input_specs import input_specs
from onnxport.core.io.model_io import check_model_file, load_graph
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import CancelToken

BIT_FOR_BIT = Thresholds(min_cosine=-1.0, max_abs_diff=0.0)


@dataclass
class ArtifactCheck:
    artifact: str
    inputs: str
    exact: bool
    tolerance: str = ""
    plain: bool = False  # also run with ORT's optimizations off
    outputs: dict[str, dict] = field(default_factory=dict)  # name -> {max_abs_diff, cosine, passed}
    passed: bool = True
    reason: str = ""

    def to_dict(self) -> dict:
        return {"artifact": self.artifact, "inputs": self.inputs, "exact": self.exact, "tolerance": self.tolerance,
                "unoptimized_exact": self.plain, "passed": self.passed,
                "reason": self.reason, "outputs": self.outputs}

    def line(self) -> str:
        worst = max((o["max_abs_diff"] for o in self.outputs.values()), default=0.0)
        verdict = "matches" if self.passed else f"DOES NOT MATCH ({self.reason})"
        kind = "bit-exact" if self.exact else f"within {self.tolerance}"
        if self.plain:
            plain = max((o.get("unoptimized_max_abs_diff", 0.0) for o in self.outputs.values()), default=0.0)
            kind += f"; with ORT's optimizations off: max abs diff {plain:.3g}"
        return f"check: {self.artifact} loaded in ONNX Runtime, {verdict} its source on {self.inputs}: " \
               f"max abs diff {worst:.3g} over {len(self.outputs)} output(s) ({kind})"


def _max_abs_diff(got: np.ndarray, want: np.ndarray) -> float:
    if got.shape != want.shape:
        return float("inf")
    if got.dtype.kind in "fc":
        a, b = got.astype(np.float64), want.astype(np.float64)
        same_nan = np.isnan(a) & np.isnan(b)
        diff = np.where(same_nan | (a == b), 0.0, np.abs(a - b))
        return float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0))
    return 0.0 if np.array_equal(got, want) else float("inf")


def _fixed_axes(source: Path, onnx_form: Path) -> dict[str, int]:
    """The source's dynamic dims (a name, or `INPUT:AXIS` for an unnamed one) -> the size the
    artifact fixed them to: the feeds are the source's, at the artifact's sizes."""
    before = {s.name: s.shape for s in input_specs(load_graph(source)) if s.shape is not None}
    sizes = {}
    for spec in input_specs(load_graph(onnx_form)):
        for axis, size in enumerate(spec.shape or ()):
            old = before.get(spec.name)
            if isinstance(size, int) and size > 0 and old is not None and axis < len(old) and not isinstance(old[axis], int):
                sizes[old[axis] if isinstance(old[axis], str) else f"{spec.name}:{axis}"] = size
    return sizes


def _source_session(source: Path, disabled: list[str]):
    """The source in a session like the artifact's: `disabled` optimizers off (runtime.session's checks)."""
    if not disabled:
        return runtime.session(source)
    import onnxruntime

    check_model_file(source)
    try:
        return onnxruntime.InferenceSession(str(source), runtime.session_options(), providers=["CPUExecutionProvider"],
                                            disabled_optimizers=disabled)
    except Exception as exc:  # noqa: BLE001 - ORT raises several Fail/InvalidGraph/NotImplemented types
        raise OnnxportError(f"{source}: ONNX Runtime cannot run this model: {runtime.ort_reason(exc)}") from None


def _judge(g: np.ndarray, w: np.ndarray, thresholds: Thresholds | None, name: str) -> dict:
    """`thresholds` None: bit for bit. Float outputs are judged by compare's rule, so a NaN or
    Inf (even one the source computes too) is never a match: it checks nothing."""
    entry = {"max_abs_diff": _max_abs_diff(g, w), "shape": list(g.shape)}
    if thresholds is None and (g.dtype.kind not in "fc" or g.shape != w.shape):
        entry["passed"] = entry["max_abs_diff"] == 0.0
        return entry
    stats = OutputStats(name)
    stats.update(g, w)
    compared = stats.result(thresholds or BIT_FOR_BIT)
    entry["passed"] = compared.passed and (thresholds is not None or entry["max_abs_diff"] == 0.0)
    if thresholds is not None:
        entry["cosine"] = compared.cosine if math.isfinite(compared.cosine) else None
    if not compared.passed:
        entry["reason"] = compared.reason
    return entry


def _pair(source: Path, artifact: Path, feed: dict, *, optimize: bool = True, disabled: list[str] | None = None):
    """(output names, the artifact's outputs, the source's) on one feed, in like sessions."""
    want_sess = _source_session(source, disabled or []) if optimize else runtime.session(source, optimize=False)
    got_sess = runtime.session(artifact, label=artifact.name, checked=True, optimize=optimize)
    names = [o.name for o in want_sess.get_outputs()]
    want = runtime.run(want_sess, names, runtime.adapt_feed(feed, want_sess), label=source.name)
    got = runtime.run(got_sess, names, runtime.adapt_feed(feed, got_sess), label=artifact.name)
    return names, [np.asarray(g) for g in got], [np.asarray(w) for w in want], got_sess


def check_artifact(source: Path, artifact: Path, onnx_form: Path, *, thresholds: Thresholds | None = None,
                   plain: bool = False, also_batch: bool = False, disabled: list[str] | None = None,
                   cancel: CancelToken | None = None) -> ArtifactCheck:
    """See the module docstring."""
    feeds = fitted_feeds(source, references=[onnx_form], count=1, dim_sizes=_fixed_axes(source, onnx_form),
                         cancel=cancel)
    feed = next(iter(feeds))
    if cancel is not None:
        cancel.check()
    names, got, want, got_sess = _pair(source, artifact, feed, disabled=disabled)
    tolerance = "" if thresholds is None else ", ".join(f"{k} {v}" for k, v in thresholds.to_dict().items())
    result = ArtifactCheck(artifact.name, runtime.describe_feed(feed), thresholds is None, tolerance)
    result.outputs = {name: _judge(g, w, thresholds, name) for name, g, w in zip(names, got, want)}
    if plain:  # what the conversion did, apart from what ORT's optimizer makes of either graph
        if cancel is not None:
            cancel.check()
        _names, got_plain, want_plain, _sess = _pair(source, artifact, feed, optimize=False)
        for name, g, w in zip(names, got_plain, want_plain):
            judged = _judge(g, w, thresholds, name)
            result.outputs[name]["unoptimized_max_abs_diff"] = judged["max_abs_diff"]
            if not judged["passed"]:
                result.outputs[name]["passed"] = False
                why = judged.get("reason") or f"max abs diff {judged['max_abs_diff']:.3g}"
                result.reason = f"{name}: {why} with ORT's optimizations off"
        result.plain = True
    if also_batch:
        _check_doubled(result, got_sess, names, feed, want)
    failed = [n for n, o in result.outputs.items() if not o["passed"]]
    if failed:
        result.passed = False
        first = result.outputs[failed[0]]
        why = first.get("reason") or f"max abs diff {first['max_abs_diff']:.3g}"
        result.reason = result.reason or f"{failed[0]}: {why}"
    return result


def _check_doubled(result: ArtifactCheck, sess, names: list[str], feed: dict, want: list) -> None:
    """The artifact on the batch twice over: both halves must match the source's answer (near
    exactly: another batch size may take other kernels)."""
    doubled = {k: np.concatenate([v, v]) if np.ndim(v) else v for k, v in feed.items()}
    got = runtime.run(sess, names, runtime.adapt_feed(doubled, sess), label=result.artifact)
    for name, g, w in zip(names, got, want):
        g = np.asarray(g)
        n = len(w) if w.ndim else 0
        halves = [g[:n], g[n:]] if g.ndim and len(g) == 2 * n else [g]
        judged = [_judge(h, w, EXACT, name) for h in halves]
        entry = result.outputs[name]
        entry["doubled_batch_max_abs_diff"] = max(j["max_abs_diff"] for j in judged)
        if not all(j["passed"] for j in judged):
            entry["passed"] = False
            result.reason = (f"{name} at twice the batch: max abs diff {entry['doubled_batch_max_abs_diff']:.3g} "
                             "(is the batch size baked into the graph?)")
    result.inputs += "; and twice that batch"
