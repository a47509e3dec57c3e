"""Is it right? Run a model and its reference in ONNX Runtime on the same inputs and compare.

Contract: `validate(model, reference, params=..., inputs=...)` returns a `ValidationReport` with,
per output of `model`, max/mean abs diff, cosine, relative L2 error and argmax agreement, and
`.passed` against `Thresholds` (default: near bit-exact for a float32 model, cosine >= 0.99 for a
quantized or float16 one). The reference is:
- with `params`: the eval graph `reference` fed with the checkpoint's parameters (see reference.py);
- without: the model at `reference` (the float32 model a quantized one came from).
Inputs: a file/folder/arrays (see feeds.py) or generated from the model's input specs. For a
quantized/float16 model the report also ranks the nodes adding the most error (sensitivity.py),
the ones to keep in float on a second try. Nothing is written.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from onnxport.core.evaluate.compare import (
    CLASSES,
    EXACT,
    LOSSY,
    VALUES,
    OutputComparison,
    OutputStats,
    Thresholds,
    output_kinds,
)
from onnxport.core.evaluate.feeds import FeedsLike
from onnxport.core.evaluate.first_run import fitted_feeds
from onnxport.core.evaluate.reference import reference_model
from onnxport.core.evaluate.runtime import adapt_feed, load_full, load_weights, precision_of, run, session
from onnxport.core.evaluate.sensitivity import (
    LayerError,
    layer_errors,
    measure_tensors,
    ranked_nodes,
    ranking_lines,
    taken_branches,
)
from onnxport.core.evaluate.tensor_errors import TensorErrors, from_measured
from onnxport.core.io.light_read import load_light_graph
from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter

VALIDATION_BATCH = 8  # samples per run when inputs come from files
REFERENCE_KEPT_BYTES = 256 << 20  # reference outputs `ReferenceRuns` keeps; past this they are run again


@dataclass
class ReferenceRuns:
    """The reference's session and its outputs per batch, kept across `validate` calls against the
    same reference on the same inputs (a quantize job's verdicts): it loads and runs once. `session`
    may be given (one of the whole reference); `runs` counts the reference's batch runs."""

    session: object | None = None
    outputs: dict[int, list] = field(default_factory=dict)
    kept_bytes: int = 0
    runs: int = 0

    def keep(self, index: int, outputs: list) -> None:
        size = sum(getattr(o, "nbytes", 0) for o in outputs)
        if self.kept_bytes + size <= REFERENCE_KEPT_BYTES:
            self.outputs[index], self.kept_bytes = outputs, self.kept_bytes + size


@dataclass
class ValidationReport:
    model: str
    reference: str
    reference_kind: str  # "eval graph + parameters" | "model"
    precision: str  # of the model: float32 | quantized | float16
    inputs: str
    batches: int
    thresholds: Thresholds
    outputs: list[OutputComparison]
    layers: list[LayerError] = field(default_factory=list)
    seconds: float = 0.0
    tensors: TensorErrors | None = None  # the error of every shared tensor (with `layers`)

    @property
    def passed(self) -> bool:
        return bool(self.outputs) and all(o.passed for o in self.outputs)

    @property
    def min_cosine(self) -> float:
        return min((o.cosine for o in self.outputs), default=0.0)

    def failures(self) -> list[str]:
        return [f"{o.name}: {o.reason}" for o in self.outputs if not o.passed]

    def worst_nodes(self, n: int = 5) -> list[str]:
        return ranked_nodes(self.layers, n)

    def to_dict(self) -> dict:
        return {
            "model": self.model, "reference": self.reference, "reference_kind": self.reference_kind,
            "precision": self.precision, "inputs": self.inputs, "batches": self.batches,
            "thresholds": self.thresholds.to_dict(), "passed": self.passed,
            "outputs": [o.to_dict() for o in self.outputs],
            "layers": [e.to_dict() for e in self.layers], "seconds": round(self.seconds, 3),
            "tensors": self.tensors.to_dict() if self.tensors is not None else None,
        }

    def summary_lines(self, verdict: bool = True) -> list[str]:
        """`verdict` False: the figures only (no target was set), no PASSED/FAILED."""
        head = f"validation {'PASSED' if self.passed else 'FAILED'}" if verdict else "measured (no accuracy target)"
        lines = [f"{head}: {Path(self.model).name} vs {self.reference_kind} {Path(self.reference).name} "
                 f"on {self.inputs}"]
        for o in self.outputs:
            argmax = "" if o.argmax_agreement is None or o.kind != CLASSES else f", argmax {100 * o.argmax_agreement:.1f}%"
            mark = ("ok " if o.passed else "BAD") if verdict else "   "
            lines.append(f"  {mark} {o.name}: max abs diff {o.max_abs_diff:.3g}, mean {o.mean_abs_diff:.3g}, "
                         f"cosine {o.cosine:.6f}{argmax}" + ("" if o.passed or not verdict else f"  ({o.reason})"))
            if o.spread_line() and self.precision != "float32":  # a lossy model's spread over samples
                lines.append(f"      {o.spread_line()}")
        jump = ["  " + self.tensors.jump_line()] if self.tensors is not None and self.tensors.tensors else []
        return lines + ["  " + line for line in ranking_lines(self.layers, 5)] + jump


def validate(
    model_path: str | Path,
    reference_path: str | Path,
    *,
    params: ParameterSet | None = None,
    inputs: FeedsLike = None,
    thresholds: Thresholds | None = None,
    layers: bool | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    dim_sizes: Mapping[str, int] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    reuse: ReferenceRuns | None = None,
) -> ValidationReport:
    """See the module docstring. `layers`: rank nodes by added error (default: for lossy models).
    `dim_sizes`/`shapes`: sizes for generated inputs (see first_run.fitted_feeds). `reuse`: the
    reference's session and outputs from an earlier call with the same reference and inputs."""
    started = time.perf_counter()
    report = Reporter(progress, cancel)
    model_path, reference_path = Path(model_path), Path(reference_path)
    report.check()
    report(0.0, f"loading {model_path.name}")
    graph = load_light_graph(model_path)  # its weights are ORT's to read
    precision = precision_of(graph)
    out_names = [o.name for o in graph.graph.output]
    # the reference pruned to the model's outputs, its weights left where they are: only the ones
    # those outputs need are read (by ORT, from the reference's folder)
    ref_model, param_feeds = reference_model(reference_path, out_names, params, weights=False)
    ref_folder = reference_path.parent
    feeds = fitted_feeds(model_path, inputs, model=graph,
                         references=[] if params is not None else [(ref_model, ref_folder)],
                         batch_size=VALIDATION_BATCH, dim_sizes=dim_sizes, shapes=shapes, cancel=report.token)
    sess = session(model_path, checked=True)  # load_light_graph checked its references
    report.check()
    report(0.05, f"loading reference {reference_path.name}")
    ref_sess = _reference_session(ref_model, reference_path, reuse)
    _check_inputs(sess, ref_sess, model_path, reference_path, {s.name for s in feeds.specs} | set(param_feeds),
                  params is not None)
    pair = _Pair(sess, ref_sess, model_path, reference_path, param_feeds)
    stats, batches = _compare(pair, out_names, output_kinds(graph), feeds, reuse, report)
    if thresholds is None:
        thresholds = EXACT if precision == "float32" else LOSSY
    outputs = [stats[n].result(thresholds) for n in out_names]
    ranked: list[LayerError] = []
    tensors = None
    if layers or (layers is None and precision != "float32" and params is None):
        report.check()
        report(0.85, "comparing intermediate tensors")
        cand, first = load_full(model_path), {**feeds.first(), **param_feeds}
        load_weights(ref_model, ref_folder)  # the intermediate tensors are compared in memory
        cand, ref_model = taken_branches(cand, ref_model, first)  # inside If branches too
        measured = measure_tensors(cand, ref_model, first)  # once, for the ranking and the map
        ranked = layer_errors(cand, ref_model, first, errors=measured)
        tensors = from_measured(ref_model, measured, model=cand)
    report(1.0, "validated")
    return ValidationReport(
        model=str(model_path), reference=str(reference_path),
        reference_kind="eval graph + parameters" if params is not None else "model",
        precision=precision, inputs=feeds.description, batches=batches, thresholds=thresholds,
        outputs=outputs, layers=ranked, seconds=time.perf_counter() - started, tensors=tensors,
    )


@dataclass
class _Pair:
    """The model's and the reference's sessions, and the parameters the reference is fed."""

    sess: object
    ref_sess: object
    model_path: Path
    reference_path: Path
    param_feeds: dict


def _reference_session(ref_model, reference_path: Path, reuse: ReferenceRuns | None):
    """The reference's session: the one `reuse` holds, else a new one (kept in `reuse`)."""
    if reuse is not None and reuse.session is not None:
        return reuse.session
    ref_sess = session(ref_model, label=str(reference_path), external_folder=reference_path.parent)
    if reuse is not None:
        reuse.session = ref_sess
    return ref_sess


def _check_inputs(sess, ref_sess, model_path: Path, reference_path: Path, given: set[str], with_params: bool) -> None:
    """Tensor inputs only, and every input the reference needs among those given."""
    not_tensors = [f"{i.name} ({i.type})" for i in sess.get_inputs() if not i.type.startswith("tensor(")]
    if not_tensors:  # sequences, optionals: neither generated nor read from .npz
        raise OnnxportError(f"{model_path.name}: input(s) {', '.join(not_tensors[:5])} are not tensors; "
                            f"validate feeds tensor inputs only")
    missing = [i.name for i in ref_sess.get_inputs() if i.name not in given]
    if missing:
        hint = "the inputs must cover them" if with_params else "pass the checkpoint (--checkpoint)"
        raise OnnxportError(f"{reference_path}: the reference needs input(s) {', '.join(missing[:5])} that "
                            f"{model_path.name} does not take", hint=hint)


def _compare(pair: _Pair, out_names: list[str], kinds: dict[str, str], feeds, reuse: ReferenceRuns | None,
             report: Reporter) -> tuple[dict[str, OutputStats], int]:
    """Both models on every batch, their outputs folded into one `OutputStats` per output."""
    stats = {name: OutputStats(name, kinds.get(name, VALUES)) for name in out_names}
    total = max(len(feeds), 1)
    batches = 0
    for i, feed in enumerate(feeds):
        report.check()
        report(0.1 + 0.7 * i / total, f"comparing outputs (batch {i + 1}/{total})")
        got = run(pair.sess, out_names, adapt_feed(feed, pair.sess), label=pair.model_path.name, hint=feeds.hint)
        want = reuse.outputs.get(i) if reuse is not None else None
        if want is None:
            want = run(pair.ref_sess, out_names, {**adapt_feed(feed, pair.ref_sess), **pair.param_feeds},
                       label=f"reference {pair.reference_path.name}", hint=feeds.hint, shown=feed)
            if reuse is not None:
                reuse.runs += 1
                reuse.keep(i, want)
        for name, g, w in zip(out_names, got, want):
            stats[name].update(g, w)
        batches += 1
    if batches == 0:
        raise OnnxportError(f"{feeds.description}: no inputs to validate with")
    return stats, batches
