"""Quantize or convert a float32 model (dynamic int8, static int8 QDQ, float16, int4) to an accuracy target.

Contract: `quantize(model, out, mode, options)` (options.py) writes `out` atomically (a failure
or cancel leaves nothing and never touches an existing `out`) and returns a `QuantizeResult`. It
coordinates the mode's strategy (strategies.py: the int8 path, calibration, attempts, search):
1. the inputs are checked, the model loads and runs in ORT; ORT pre-processing (prep.py);
2. the validation inputs (given; else calibration data; else bundled sentences for a text model
   with a known tokenizer; else generated) are split (held_out.py): search part, held-out part;
3. the strategy prepares (static: calibration ranges, never from the held-out part);
4. with `accuracy_target` (default 0.99 cosine per output, argmax agreement for a classifier) the
   strategy's search keeps nodes in float while it misses, recorded in `kept_float_nodes` and the
   `onnxport.quantize` metadata (for `requantize`);
5. the verdict on the held-out part (the float model loads and runs once, validate.ReferenceRuns):
   a miss, or nothing gained (gain.py), writes nothing, and says which of the two it was.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

from onnxport.core.evaluate.compare import LOSSY, NOTHING_TO_VALIDATE, lossy
from onnxport.core.evaluate.feeds import input_specs
from onnxport.core.evaluate.first_run import fitted_feeds
from onnxport.core.evaluate.runtime import model_size, session
from onnxport.core.evaluate.tensor_errors import in_reference, without_kept
from onnxport.core.evaluate.validate import ReferenceRuns, ValidationReport, validate
from onnxport.core.export.staging import Staging
from onnxport.core.export.writer import check_destination
from onnxport.core.io.model_io import load_graph, read_graph
from onnxport.core.io.run_reads import model_reads
from onnxport.core.quantize import MODES, bounded, gain, held_out, modes
from onnxport.core.quantize.calibration_sources import calibration_data
from onnxport.core.quantize.domains import drop_unused_domains
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.prep import map_node_names
from onnxport.core.quantize.result import QuantizeResult
from onnxport.core.quantize.search import LoopResult
from onnxport.core.quantize.search_static import search_notes
from onnxport.core.quantize.strategies import CALIBRATION_BATCH, Job, Strategy, strategy_for
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.logs import with_quiet_onnxruntime
from onnxport.core.util.out_paths import check_output
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter
from onnxport.core.util.text import first_line

METADATA_KEY = "onnxport.quantize"

__all__ = ["CALIBRATION_BATCH", "MODES", "QuantizeOptions", "QuantizeResult", "quantize", "requantize"]


@with_quiet_onnxruntime
def quantize(
    model_path: str | Path, out_path: str | Path, mode: str,
    options: QuantizeOptions | None = None,
    *,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> QuantizeResult:
    """See the module docstring; `options`: the run's choices (QuantizeOptions' defaults when None)."""
    started = time.perf_counter()
    o = options if options is not None else QuantizeOptions()
    if mode not in MODES:
        raise OnnxportError(f"unknown quantization mode '{mode}'; choose one of {', '.join(MODES)}")
    if o.accuracy_target is not None and not 0.0 < o.accuracy_target <= 1.0:
        raise OnnxportError(f"accuracy target must be a cosine in (0, 1], got {o.accuracy_target}")
    modes.check_op_types(mode, list(o.op_types) if o.op_types else None)
    model_path, out_path = Path(model_path), Path(out_path)
    report = Reporter(progress, cancel)
    source, float_session, calibration, validation_inputs, size = _open(model_path, out_path, o, report, mode)
    strategy = strategy_for(mode, o)
    with Staging(out_path) as stage:
        job = Job(model_path, out_path.name, source, input_specs(source), stage, report,
                  size > modes.SAVE_EXTERNAL_BYTES, model_path, source_bytes=size,
                  calibration=calibration, validation_inputs=validation_inputs, float_session=float_session,
                  thresholds=lossy(o.accuracy_target) if o.accuracy_target is not None else None,
                  bounded=bounded.applies(mode, size))
        if job.bounded:
            job.notes.append(bounded.note(size))
        if strategy.needs_text(job):
            job.text = held_out.default_text(job.specs, model_path, o.tokenizer)
        strategy.check(job)
        _inputs(job, strategy, o)
        strategy.prepare(job)
        refs = ReferenceRuns(session=None if job.big else job.float_session)  # the float model loads and runs once
        job.float_session = float_session = None

        def verdict(dst: Path, at: float = 0.4) -> ValidationReport:  # `at`: where progress stands
            report.check()
            report(at, "validating against the float32 model on held-out inputs")
            assert job.parts is not None
            if job.bounded:
                return bounded.verdict(dst, model_path, job.parts.held_out, job.thresholds or LOSSY, report.sub(at, 0.9))
            return validate(dst, model_path, inputs=job.parts.held_out, thresholds=job.thresholds or LOSSY,
                            layers=True, reuse=refs)

        outcome = (bounded.one_attempt(lambda exclude, dst: strategy.attempt(exclude, dst, job), stage, out_path.name,
                                       job.excluded, verdict, o.accuracy_target)
                   if job.bounded else strategy.search(job, verdict))
        job.notes += search_notes(outcome.search, mode)
        final = _judged(job, strategy, outcome, o.accuracy_target, verdict)
        final.model = str(out_path)
        chosen = strategy.choose(job)
        data_files = _stamp(outcome.path, {**chosen, "excluded_nodes": job.excluded, "kept_float_nodes": outcome.kept,
                              "source": model_path.name})
        report.check()
        report(0.98, f"writing {out_path.name}")
        written = stage.commit(outcome.path, report, data_files=data_files)
    report.finished()
    return QuantizeResult(
        path=out_path, data_path=next((p for p in written if p != out_path), None), mode=mode,
        size_bytes=sum(p.stat().st_size for p in written), source_path=model_path,
        source_size_bytes=size, kept_float_nodes=outcome.kept, excluded_nodes=job.excluded,
        options=chosen,
        attempts=outcome.attempts, target=o.accuracy_target, int8_path=strategy.int8_line, search=outcome.search,
        target_met=outcome.met if o.accuracy_target is not None else None, validation=final, notes=job.notes,
        seconds=time.perf_counter() - started,
    )


def _open(model_path: Path, out_path: Path, o: QuantizeOptions, report: Reporter, mode: str):
    """The destination checked, the model loaded and checked to run in ORT (a model ORT cannot run
    cannot be quantized: said first; not one too big to load whole (bounded.py): its verdict runs
    it in pieces), the calibration and validation data read, and the model's bytes."""
    check_destination(out_path)
    data_reads = {p: "a data file this run reads" for p in (o.calibration, o.validation_inputs, o.tokenizer)
                  if isinstance(p, (str, os.PathLike))}
    check_output(out_path, {**model_reads(model_path, None), **data_reads})
    _quiet_onnxruntime()
    report.check()
    report(0.0, f"loading {model_path.name}")
    source = load_graph(model_path)
    check_output(out_path, model_reads(model_path, source))  # and its external data
    specs = input_specs(source)
    size = model_size(model_path)
    float_session = None if bounded.applies(mode, size) else session(model_path, checked=True)
    calibration, validation_inputs = (calibration_data(d, specs, model_path, o.tokenizer)
                                      for d in (o.calibration, o.validation_inputs))
    return source, float_session, calibration, validation_inputs, size


def _inputs(job: Job, strategy: Strategy, o: QuantizeOptions) -> None:
    """Pre-processing, the exclusions in its names, and the validation inputs split in two."""
    report = job.report
    if strategy.preprocess and o.preprocess and not job.bounded:
        report.check()
        report(0.02, "pre-processing (ONNX Runtime optimizer, shape inference)")
        job.prepared = job.stage.path("prepared.onnx")
        job.notes += _preprocess(job.model_path, job.prepared, job.big or _external_weights(job.source))
    job.excluded = map_node_names(list(dict.fromkeys(o.exclude_nodes)), job.model_path, job.prepared, job.notes)
    val_source = strategy.validation_source(job)
    job.fitted = fitted_feeds(job.model_path, val_source, model=job.source, specs=job.specs,
                              batch_size=CALIBRATION_BATCH, dim_sizes=o.dim_sizes, shapes=o.shapes,
                              cancel=report.token, probe=not job.bounded,  # sizes that run
                              **({"batch": bounded.VERDICT_BATCH} if job.bounded else {}))
    # static with calibration and validation data: not the search on the calibration data, the
    # model fits the data its ranges came from (PP-OCR: 0.993 there, 0.989 on other pages)
    job.parts = held_out.split(job.fitted, after=strategy.held_out_after)
    if job.bounded:
        job.parts.held_out = bounded.limited(job.parts.held_out)
    job.notes += job.parts.notes
    if job.fitted.generated:
        job.notes.append(f"validated on generated inputs ({job.parts.held_out.description})")
    elif val_source is job.text and job.text is not None:
        job.notes.append("validated on bundled English sentences (tokenized by the model's tokenizer), the verdict "
                         "on ones the search never saw: give --validation-inputs for your own data")


def _judged(job: Job, strategy: Strategy, outcome: LoopResult, target: float | None, verdict) -> ValidationReport:
    """The held-out verdict of the search's answer; raises, writing nothing, when the target was
    missed or nothing was gained, naming which."""
    name = job.model_path.name
    if target is not None and not outcome.met:
        last = outcome.attempts[-1]
        _check_reference_finite(name, last["failures"], job.parts.held_out.description if job.parts else None)
        why = (f"cosine {last['min_cosine']:.4f} < {target} on '{last['worst_output']}'"
               if last["min_cosine"] < target else "; ".join(last["failures"]))
        raise OnnxportError(f"{name}: quantized model misses the accuracy target ({why}) even with "
                            f"{len(last['kept_float_nodes'])} node(s) kept in float; nothing written",
                            hint="lower the target, or validate with representative inputs")
    _check_gain(job, strategy.mode, strategy.op_types, outcome, target)
    final = outcome.final if outcome.final is not None else verdict(outcome.path, 0.93)
    if outcome.kept or job.excluded:  # no per-node blame on what computes in float
        without_kept(final, in_reference(job.source, outcome.kept + job.excluded))
    if target is not None and not final.passed:
        _check_reference_finite(name, final.failures(), final.inputs)
        raise OnnxportError(
            f"{name}: the quantized model meets the accuracy target on the inputs the search tuned on, but not "
            f"on held-out ones ({'; '.join(final.failures())}) with {len(outcome.kept)} node(s) kept in float; "
            "nothing written", hint="lower the target, or validate with more representative inputs")
    return final


def _check_reference_finite(name: str, failures: list[str], inputs: str | None) -> None:
    """A target missed only because the float model computes NaN/Inf on every validation value is
    no accuracy problem: nothing could be checked, and the error says that, not "lower the target"."""
    if failures and all(NOTHING_TO_VALIDATE in f for f in failures):
        outputs = ", ".join(f.split(":")[0] for f in failures)
        raise OnnxportError(f"{name}: the quantized model cannot be checked: the float model's outputs ({outputs}) are "
                            f"all NaN/Inf on the validation inputs{f' ({inputs})' if inputs else ''}; nothing written",
                            hint="--validation-inputs with inputs it computes finite outputs for; NaN/Inf on "
                                 "every input points at its weights", option="--validation-inputs")


def _check_gain(job: Job, mode: str, op_types, outcome: LoopResult, target: float | None) -> None:
    """A result that quantized nothing, or is neither smaller nor faster, is an error (gain.py); when
    the search kept nodes in float to meet the target, the reason is the target: said so, with what
    quantizing everything gave."""
    from onnxport.core.evaluate.benchmark import benchmark

    name, kept, report = job.model_path.name, outcome.kept, job.report
    if gain.quantized_nothing(job.source, read_graph(outcome.path)[0]):  # written here: checked at open
        if kept:
            raise OnnxportError(f"{name}: the accuracy target needs every quantized node ({len(kept)}) "
                                f"kept in float: {mode} quantization gains nothing, no {mode} model written",
                                hint="lower the target, or validate with representative inputs")
        raise gain.nothing_quantized(name, mode, job.source, list(op_types or modes.DYNAMIC_OP_TYPES))
    ratio = model_size(outcome.path) / max(job.source_bytes, 1)
    latency = high = None
    if ratio > gain.SMALLER:  # not (meaningfully) smaller: it must at least be faster
        report.check()
        report(0.92, "measuring whether the result, hardly smaller, is faster")
        bench = benchmark([job.model_path, outcome.path], inputs=job.search_feeds.first(), seconds=1.0, threads=1)
        latency, high = bench.latency_ratio, bench.ratio.high if bench.ratio is not None else None
    why = gain.nothing_gained(ratio, latency, high)
    if why and kept and target is not None:
        raise OnnxportError(f"{name}: {mode} quantization misses the accuracy target (cosine >= {target}) unless "
                            f"{len(kept)} node(s) stay in float, and then gains nothing ({why}); {_whole(job, outcome)}; "
                            f"no {mode} model written",
                            hint="lower the target (--target), or --no-target to write the model quantized whole")
    if why:
        raise OnnxportError(f"{name}: {mode} quantization gains nothing: {why}; no {mode} model written",
                            hint="quantization pays off on large MatMul/Gemm/Conv weights")


def _whole(job: Job, outcome: LoopResult) -> str:
    """What the first attempt, nothing kept in float, measured: what the target cost."""
    first = next((a for a in outcome.attempts if not a["kept_float_nodes"]), None)
    if first is None:
        return "quantized whole: not measured"
    ratio = first["size_bytes"] / max(job.source_bytes, 1)
    return f"quantized whole: {ratio:.2f}x the size at cosine {first['min_cosine']:.4f} on '{first['worst_output']}'"


def _preprocess(src: Path, dst: Path, big: bool) -> list[str]:
    from onnxport.core.quantize.prep import preprocess

    return preprocess(src, dst, big=big)


def _external_weights(model) -> bool:
    """Whether the main graph's initializers name external data (prep.py's own test)."""
    import onnx

    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _stamp(path: Path, info: dict) -> list[str]:
    """Record how the model was quantized in its metadata (for `requantize` and for people); the
    data files the model names (for the commit, which then need not read it again)."""
    import onnx

    from onnxport.core.util.data_files import data_location, external_tensors

    model = read_graph(path)[0]  # written by this run from a model checked at open
    kept = [p for p in model.metadata_props if p.key != METADATA_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    model.metadata_props.add(key=METADATA_KEY, value=json.dumps(info))
    drop_unused_domains(model)  # ORT's tools declare seven domains whether used or not
    onnx.save_model(model, str(path))
    try:
        onnx.checker.check_model(str(path))  # by path: external data and models over 2 GB alike
    except (onnx.checker.ValidationError, ValueError) as exc:
        raise OnnxportError(f"{path.name}: the {info.get('mode')} model fails onnx.checker "
                            f"({first_line(exc, 300)}); nothing written") from None
    return [data_location(t) for t in external_tensors(model.graph)]


def quantize_info(path: str | Path) -> dict | None:
    """The `onnxport.quantize` metadata of a model onnxport quantized, else None."""
    for p in load_graph(path).metadata_props:
        if p.key == METADATA_KEY:
            try:
                return json.loads(p.value)
            except ValueError:
                return None
    return None


def requantize(quantized_path: str | Path, reference_path: str | Path, out_path: str | Path,
               exclude_more: Iterable[str], options: QuantizeOptions | None = None, *,
               progress: ProgressFn | None = None, cancel: CancelToken | None = None,
               **overrides) -> QuantizeResult:
    """Quantize `reference_path` again as `quantized_path` was, also keeping `exclude_more` in float.
    The recorded choices replace those of `options` (default: QuantizeOptions()); `overrides`
    (QuantizeOptions fields) replace both."""
    info = quantize_info(quantized_path)
    if info is None:
        raise OnnxportError(f"{quantized_path}: not quantized by onnxport (no '{METADATA_KEY}' metadata); "
                            "run onnxport quantize with --exclude instead")
    recorded = {k: info[k] for k in ("per_channel", "reduce_range", "op_types", "keep_io_types", "block_ops",
                                     "accuracy_target") if k in info}
    recorded["exclude_nodes"] = list(dict.fromkeys(
        list(info.get("excluded_nodes", [])) + list(info.get("kept_float_nodes", [])) + list(exclude_more)))
    again = dataclasses.replace(options if options is not None else QuantizeOptions(), **{**recorded, **overrides})
    return quantize(reference_path, out_path, info["mode"], again, progress=progress, cancel=cancel)


def _quiet_onnxruntime() -> None:
    """ORT's C++ side logs to stderr: keep it to errors (ORT's own process-wide logger setting; its
    Python side's root-logger records are dropped by `with_quiet_onnxruntime` for the call only)."""
    import onnxruntime as ort

    ort.set_default_logger_severity(3)


__all__ += ["ValidationReport", "quantize_info"]
