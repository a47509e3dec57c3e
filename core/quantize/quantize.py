"""Quantize or convert a float32 model (dynamic int8, static int8 QDQ, float16, int4) to an accuracy target.

Contract: `quantize(model, out, mode, options)` (options.py) writes `out` atomically (a failure
or cancel leaves nothing and never touches an existing `out`) and returns a `QuantizeResult`. Steps:
0-1. int8: the CPU's int8 path (cpu_int8.py) picks 7/8-bit weights; ORT pre-processing (prep.py);
2. the validation inputs (given; else calibration data; else bundled sentences for a text model
   with a known tokenizer; else generated) are split (held_out.py): search part, held-out part;
3. static: calibration ranges (never the held-out part), once; `calibration_required`: refuse up front;
4. with `accuracy_target` (default 0.99 cosine per output, argmax agreement for a classifier):
   while the search part misses, keep nodes in float (search.py, search_static.py), recorded in
   `kept_float_nodes` and the `onnxport.quantize` metadata (for `requantize`);
5. the verdict on the held-out part (per-sample spread included; the float model loads and runs
   once, validate.ReferenceRuns; dynamic: the first attempt, tuned on nothing, is judged by it at
   once): a miss, or nothing gained (gain.py), writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path

from onnxport.core.evaluate.compare import LOSSY, lossy
from onnxport.core.evaluate.feeds import FeedsLike, input_specs, open_feeds
from onnxport.core.evaluate.first_run import fitted_feeds
from onnxport.core.evaluate.runtime import model_size, session
from onnxport.core.evaluate.validate import ReferenceRuns, ValidationReport, validate
from onnxport.core.export.staging import Staging
from onnxport.core.export.writer import check_destination
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.run_reads import model_reads
from onnxport.core.quantize import MODES, cpu_int8, gain, held_out, modes, search
from onnxport.core.quantize.calibration_bias import bias_corrected, input_means
from onnxport.core.quantize.calibration_sources import calibration_data
from onnxport.core.quantize.domains import drop_unused_domains
from onnxport.core.quantize.finite_values import check_weights
from onnxport.core.quantize.fp16_loop import fp16_loop
from onnxport.core.quantize.node_names import input_producers, map_node_names
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.quantize.result import QuantizeResult
from onnxport.core.quantize.search_static import search_notes, static_loop
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.logs import with_quiet_onnxruntime
from onnxport.core.util.out_paths import check_output
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter
from onnxport.core.util.text import first_line

INT8_MODES = ("dynamic", "static")
METADATA_KEY = "onnxport.quantize"
CALIBRATION_BATCH = 8
GENERATED_CALIBRATION_BATCHES = 16

__all__ = ["MODES", "QuantizeOptions", "QuantizeResult", "quantize", "requantize"]


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
    calibration, validation_inputs, tokenizer, accuracy_target = (o.calibration, o.validation_inputs, o.tokenizer,
                                                                  o.accuracy_target)
    per_channel, reduce_range, op_types, block_ops = o.per_channel, o.reduce_range, o.op_types, o.block_ops
    keep_io_types, block_size = o.keep_io_types, o.block_size
    if mode not in MODES:
        raise OnnxportError(f"unknown quantization mode '{mode}'; choose one of {', '.join(MODES)}")
    if accuracy_target is not None and not 0.0 < accuracy_target <= 1.0:
        raise OnnxportError(f"accuracy target must be a cosine in (0, 1], got {accuracy_target}")
    op_types = list(op_types) if op_types else None
    modes.check_op_types(mode, op_types)
    model_path, out_path = Path(model_path), Path(out_path)
    check_destination(out_path)
    data_reads = {p: "a data file this run reads" for p in (calibration, validation_inputs, tokenizer)
                  if isinstance(p, (str, os.PathLike))}
    check_output(out_path, {**model_reads(model_path, None), **data_reads})
    report = Reporter(progress, cancel)
    _quiet_onnxruntime()
    report.check()
    report(0.0, f"loading {model_path.name}")
    source = load_graph(model_path)
    check_output(out_path, model_reads(model_path, source))  # and its external data
    specs = input_specs(source)
    float_session = session(model_path, checked=True)  # a model ORT cannot run cannot be quantized: say so first
    calibration, validation_inputs = (calibration_data(d, specs, model_path, tokenizer)
                                      for d in (calibration, validation_inputs))
    text = None  # the bundled sentences, for a text model whose tokenizer is known (held_out.py)
    if (validation_inputs is None and (mode != "static" or calibration is None)) or (
            mode == "static" and calibration is None):
        text = held_out.default_text(specs, model_path, tokenizer)
    source_bytes = model_size(model_path)
    big = source_bytes > modes.SAVE_EXTERNAL_BYTES
    notes: list[str] = []
    excluded = list(dict.fromkeys(o.exclude_nodes))
    if mode != "fp16":  # int8/int4 scales come from each weight's min and max (finite_values.py)
        weight_ops = {"dynamic": [*(op_types or modes.DYNAMIC_OP_TYPES), "Gemm"], "int4": ["MatMul"]}
        check_weights(source, model_path.parent, weight_ops.get(mode) or modes.static_op_types(op_types), excluded,
                      model_path.name)
    if mode == "dynamic" and any(n.op_type in modes.NO_DYNAMIC for g in gain.all_graphs(source) for n in g.node):
        notes.append("Conv layers stay float in dynamic mode (ONNX Runtime's CPU provider has no int8 "
                     "ConvInteger); --mode static quantizes them")
    if mode == "static" and (inside := gain.static_reach(model_path.name, source)):
        notes.append(inside)  # raised instead when every weight op is inside a body
    if mode == "static" and calibration is None and text is None and o.calibration_required:
        raise held_out.calibration_needed(model_path.name)
    path = cpu_int8.resolve(o.int8_path) if mode in INT8_MODES else None
    if path is not None:  # the weight format that is exact on this CPU's int8 kernels (cpu_int8.py)
        notes.append(path.describe(reduce_range))
        reduce_range = path.reduce_range if reduce_range is None else reduce_range
    channel_default = per_channel is None  # per-channel first (static falls back per-tensor if it cannot)
    per_channel = (mode in INT8_MODES) if per_channel is None else per_channel
    per_channel, reduce_range = bool(per_channel), bool(reduce_range)
    chosen = {"mode": mode, "per_channel": per_channel, "reduce_range": reduce_range, "op_types": op_types,
               "keep_io_types": keep_io_types, "block_ops": list(block_ops), "accuracy_target": accuracy_target,
               "int8_path": path.name if path is not None else None}
    if mode == "int4":
        chosen["block_size"] = block_size

    with Staging(out_path) as stage:
        prepared = model_path
        if mode != "fp16" and o.preprocess:
            report.check()
            report(0.02, "pre-processing (ONNX Runtime optimizer, shape inference)")
            prepared = stage.path("prepared.onnx")
            notes += _preprocess(model_path, prepared)
        excluded = map_node_names(excluded, model_path, prepared, notes)
        val_source = validation_inputs if validation_inputs is not None else (
            calibration if mode == "static" and calibration is not None else text)
        val_feeds = fitted_feeds(model_path, val_source, model=source, specs=specs, batch_size=CALIBRATION_BATCH,
                                 dim_sizes=o.dim_sizes, shapes=o.shapes, cancel=report.token)  # sizes that run
        # static with calibration and validation data: not the search on the calibration data, the
        # model fits the data its ranges came from (PP-OCR: 0.993 there, 0.989 on other pages)
        parts = held_out.split(val_feeds, after=GENERATED_CALIBRATION_BATCHES if mode == "static" else 0)
        notes += parts.notes
        if val_feeds.generated:
            notes.append(f"validated on generated inputs ({parts.held_out.description})")
        elif val_source is text and text is not None:
            notes.append("validated on bundled English sentences (tokenized by the model's tokenizer), the verdict "
                         "on ones the search never saw: give --validation-inputs for your own data")
        if mode == "static" and calibration is None and text is not None:
            calibration = parts.seen if val_source is text else text  # real sentences, not random ids
        elif mode == "static" and val_source is calibration and calibration is not None:
            calibration = parts.seen  # the held-out part stays unseen by calibration too
        fitted, val_feeds = val_feeds, parts.search  # the search sees only its part
        tensors_range = means = None
        if mode == "static":
            if per_channel:  # per-channel QDQ needs opset 13: convert before calibrating, so ranges match
                prepared, per_channel = _axis_opset(prepared, stage.path("opset13.onnx"), big, notes, channel_default)
                chosen["per_channel"] = per_channel
            tensors_range, means = _calibrate(prepared, calibration, specs, stage.path(""), big, op_types,
                                              report.sub(0.1, 0.4), notes, like=fitted)
        beyond = modes.fp16_beyond(prepared, val_feeds, stage.path("")) if mode == "fp16" else None
        if mode == "dynamic":  # outlier channels in float beside the int8 rest: exact in float (outlier_plan.py)
            report.check()
            report(0.4, "splitting off outlier channels")
            prepared = modes.dynamic_source(prepared, val_feeds, stage.path("split.onnx"), notes, op_types, big)
            report.check()

        gemms = {n.name for g in gain.all_graphs(load_graph(prepared)) for n in g.node
                 if n.op_type == "Gemm"} if mode == "dynamic" else set()

        def attempt(exclude: list[str], dst: Path) -> None:
            if mode == "dynamic":  # ORT splits a Gemm `g` into `g_MatMul` + `g_Add` before it reads the exclusions
                exclude = exclude + [f"{n}_MatMul" for n in exclude if n in gemms]
                modes.dynamic(prepared, dst, op_types=op_types, per_channel=per_channel,
                              reduce_range=reduce_range, exclude=exclude, big=big)
            elif mode == "static":  # biases corrected for this attempt's weight rounding (calibration_bias.py)
                corrected = bias_corrected(prepared, stage.path("corrected.onnx"), means, per_channel=per_channel,
                                           reduce_range=reduce_range, exclude=exclude, notes=notes)
                modes.static(corrected, dst, tensors_range=tensors_range, op_types=op_types,
                             per_channel=per_channel, reduce_range=reduce_range, exclude=exclude, big=big)
            elif mode == "int4":
                modes.int4(prepared, dst, exclude=exclude, block_size=block_size, big=big)
            else:
                fp16 = modes.fp16(prepared, dst, keep_io_types=keep_io_types, block_ops=block_ops,
                                  exclude=exclude, big=big, beyond=beyond)
                notes[:] = [n for n in notes if not n.startswith("kept float32")] + fp16.notes()

        loop = report.sub(0.4, 0.92)
        ranked_ops = None if mode == "fp16" else set(
            modes.static_op_types(op_types) if mode == "static" else (op_types or modes.DYNAMIC_OP_TYPES)) | {"Gemm"}
        thresholds = lossy(accuracy_target) if accuracy_target is not None else None
        refs = ReferenceRuns(session=None if big else float_session)  # the float model loads and runs once
        del float_session

        def verdict(dst: Path, at: float = 0.93) -> ValidationReport:  # `at`: where progress stands
            report.check()
            report(at, "validating against the float32 model on held-out inputs")
            return validate(dst, model_path, inputs=parts.held_out, thresholds=thresholds or LOSSY, layers=True,
                            reuse=refs)

        if mode == "dynamic" and thresholds is not None:
            outcome = search.dynamic_loop(attempt, stage, out_path.name, prepared, val_feeds, excluded, thresholds,
                                          ranked_ops, loop, (lambda d: verdict(d, 0.4)) if parts.apart else None)
        elif mode == "static" and thresholds is not None:
            outcome = static_loop(attempt, stage, out_path.name, prepared, val_feeds, excluded, thresholds,
                                  ranked_ops, loop, input_producers(prepared, ranked_ops))
        else:  # fp16 is judged on the held-out part first (nothing tuned); then search.layer_error_loop
            outcome = fp16_loop(attempt, stage, out_path.name, prepared, val_feeds, excluded, thresholds, ranked_ops,
                                loop, (lambda d: verdict(d, 0.4)) if mode == "fp16" and parts.apart else None)
        dst, kept, attempts, met = outcome.path, outcome.kept, outcome.attempts, outcome.met
        notes += search_notes(outcome.search, mode)
        if thresholds is not None and not met:
            last = attempts[-1]
            why = (f"cosine {last['min_cosine']:.4f} < {accuracy_target} on '{last['worst_output']}'"
                   if last["min_cosine"] < accuracy_target else "; ".join(last["failures"]))
            raise OnnxportError(
                f"{model_path.name}: quantized model misses the accuracy target ({why}) even with "
                f"{len(last['kept_float_nodes'])} node(s) kept in float; nothing written",
                hint="lower the target, or validate with representative inputs")
        _check_gain(model_path, source, dst, mode, op_types, kept, val_feeds, report)
        final = outcome.final if outcome.final is not None else verdict(dst)
        final.model = str(out_path)
        if thresholds is not None and not final.passed:
            raise OnnxportError(
                f"{model_path.name}: the quantized model meets the accuracy target on the inputs the search tuned "
                f"on, but not on held-out ones ({'; '.join(final.failures())}) with {len(kept)} node(s) kept in "
                "float; nothing written", hint="lower the target, or validate with more representative inputs")
        _stamp(dst, {**chosen, "excluded_nodes": excluded, "kept_float_nodes": kept, "source": model_path.name})
        report.check()
        report(0.98, f"writing {out_path.name}")
        written = stage.commit(dst, report)
    size = sum(p.stat().st_size for p in written)
    report.finished()
    return QuantizeResult(
        path=out_path, data_path=next((p for p in written if p != out_path), None), mode=mode,
        size_bytes=size, source_path=model_path, source_size_bytes=source_bytes, kept_float_nodes=kept,
        excluded_nodes=excluded, options=chosen, attempts=attempts, target=accuracy_target,
        int8_path=path.describe(chosen["reduce_range"]) if path is not None else None, search=outcome.search,
        target_met=met if accuracy_target is not None else None, validation=final, notes=notes,
        seconds=time.perf_counter() - started,
    )


def _preprocess(src: Path, dst: Path) -> list[str]:
    from onnxport.core.quantize.prep import preprocess

    return preprocess(src, dst)


def _calibrate(prepared: Path, calibration: FeedsLike, specs, workdir: Path, big: bool, op_types,
               report: Reporter, notes: list[str], like=None):
    from onnxport.core.quantize.calibration import calibrate

    feeds = open_feeds(calibration, specs, batch_size=CALIBRATION_BATCH, generate=GENERATED_CALIBRATION_BATCHES,
                       like=like)
    if feeds.generated:
        notes.append("calibrated on generated random inputs: ranges may not match real data "
                     "(give calibration data for a better model)")
    ranges = calibrate(prepared, feeds, modes.static_op_types(op_types), workdir, report, big)
    if not {"Conv", "ConvTranspose"} & set(modes.static_op_types(op_types)):
        return ranges, None
    return ranges, input_means(prepared, feeds, workdir, report, modes.static_op_types(op_types))


def _axis_opset(prepared: Path, dst: Path, big: bool, notes: list[str], fallback: bool) -> tuple[Path, bool]:
    """(the model with opset >= 13, per-channel) or, when per-channel was only the default and the
    conversion fails, (the model as it is, per-tensor) with a note."""
    try:
        return modes.with_axis_opset(prepared, dst, big, notes), True
    except OnnxportError as exc:
        if not fallback:
            raise
        notes.append(f"per-tensor weight scales: {exc.one_line()}")
        return prepared, False


def _check_gain(model_path: Path, source, dst: Path, mode: str, op_types, kept: list[str], val_feeds,
                report: Reporter) -> None:
    """A result that quantized nothing, or is neither smaller nor faster, is an error (gain.py)."""
    from onnxport.core.evaluate.benchmark import benchmark

    if gain.quantized_nothing(source, load_graph(dst)):
        if kept:
            raise OnnxportError(f"{model_path.name}: the accuracy target needs every quantized node ({len(kept)}) "
                                f"kept in float: {mode} quantization gains nothing, no {mode} model written",
                                hint="lower the target, or validate with representative inputs")
        raise gain.nothing_quantized(model_path.name, mode, source, list(op_types or modes.DYNAMIC_OP_TYPES))
    ratio = model_size(dst) / max(model_size(model_path), 1)
    latency = None
    if ratio > gain.SMALLER:  # not (meaningfully) smaller: it must at least be faster
        report.check()
        report(0.92, "measuring whether the result, hardly smaller, is faster")
        latency = benchmark([model_path, dst], inputs=val_feeds.first(), seconds=1.0, threads=1).latency_ratio
    why = gain.nothing_gained(ratio, latency)
    if why:
        raise OnnxportError(f"{model_path.name}: {mode} quantization gains nothing: {why}; no {mode} model written",
                            hint="quantization pays off on large MatMul/Gemm/Conv weights")


def _stamp(path: Path, info: dict) -> None:
    """Record how the model was quantized in its metadata (for `requantize` and for people)."""
    import onnx

    model = load_graph(path)
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
