"""The report that answers "is it right, and is it faster?": one JSON-ready dict per run.

Contract: `build_report(...)` gathers what ran (export, validation of the export, quantization
with its validation against float32, benchmark) into a dict with a stable shape
(`kind: "onnxport.report"`, `version: 1`), plus a `chart` section the app's report view draws
directly: size and latency before/after, and error per output (cosine, max abs diff, pass).
Any section may be missing. `write_report` writes it atomically; `summary_lines` is the text form.
A lossy validation carries the error of every tensor shared with its reference (`accuracy_map`
finds it; core/evaluate/tensor_errors.py); `diff` is the before/after table of the two models a
report compares (core/evaluate/model_diff.py: ops, parameters and bytes per dtype, latency,
accuracy per output), when both files are there.
"""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path

from onnxport.core.evaluate.compare import CLASSES
from onnxport.core.evaluate.model_diff import diff_lines, report_diff
from onnxport.core.export.staging import write_json_atomic
from onnxport.core.util.text import human_size

REPORT_KIND = "onnxport.report"
REPORT_VERSION = 1


def build_report(*, export: dict | None = None, validation=None, quantize=None, bench=None, providers=None) -> dict:
    """`validation` (of an export), `quantize` (a QuantizeResult), `bench` (a BenchReport) and
    `providers` (a runtimes ProvidersReport: its list under "providers", the rest under
    "providers_run") may be None."""
    report: dict = {"kind": REPORT_KIND, "version": REPORT_VERSION,
                    "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if export is not None:
        report["export"] = export
    if validation is not None:
        report["validation"] = validation.to_dict()
    if quantize is not None:
        report["quantize"] = quantize.to_dict()
    if bench is not None:
        report["bench"] = bench.to_dict()
    if providers is not None:
        run = providers.to_dict()
        report["providers"] = run.pop("providers")
        report["providers_run"] = run
    report["chart"] = _chart(report)
    diff = report_diff(report)
    if diff is not None:
        report["diff"] = diff.to_dict()
    report["passed"] = _passed(report)
    return _json_safe(report)


def _chart(report: dict) -> dict:
    chart: dict = {"labels": {"before": "float32", "after": None}, "size_bytes": None, "latency_ms": None,
                   "outputs": []}
    q = report.get("quantize")
    b = report.get("bench")
    if q:
        chart["labels"]["after"] = q["mode"]
        chart["size_bytes"] = {"before": q["source_size_bytes"], "after": q["size_bytes"]}
    if b and b.get("models"):
        models = b["models"]
        chart["latency_ms"] = {"before": models[0]["p50_ms"], "after": models[1]["p50_ms"] if len(models) > 1 else None}
        if not q and len(models) > 1:
            chart["size_bytes"] = {"before": models[0]["size_bytes"], "after": models[1]["size_bytes"]}
            chart["labels"] = {"before": Path(models[0]["path"]).name, "after": Path(models[1]["path"]).name}
    validation = (q or {}).get("validation") or report.get("validation")
    if validation:
        chart["outputs"] = [{"name": o["name"], "cosine": o["cosine"], "max_abs_diff": o["max_abs_diff"],
                             "passed": o["passed"]} for o in validation["outputs"]]
        chart["min_cosine"] = validation["thresholds"].get("min_cosine")
    return chart


def accuracy_map(report: dict) -> dict | None:
    """The error map (tensor_errors.TensorErrors.to_dict) of the report's lossy validation, if any:
    the quantization's, else a standalone validation's."""
    for v in ((report.get("quantize") or {}).get("validation"), report.get("validation")):
        if v and v.get("tensors"):
            return v["tensors"]
    return None


def keepable_nodes(report: dict | None, names: list[str]) -> list[str]:
    """The nodes to keep in float for `names` picked in the report's ranking: a ranked node stands for
    its group (sensitivity.LayerError.group: the quantized nodes whose error shows at its output,
    e.g. the MatMul fused ahead of a ranked Add); other names are kept as they are."""
    validation = ((report or {}).get("quantize") or {}).get("validation") or (report or {}).get("validation") or {}
    groups = {e["node"]: e.get("group") or [e["node"]] for e in validation.get("layers", [])}
    return list(dict.fromkeys(n for name in names for n in groups.get(name, [name])))


def _passed(report: dict) -> bool | None:
    """The verdicts asked for: the export's validation, the runs on other providers, and the
    quantized model's unless it was only measured (no accuracy target: `quantize --no-target`, the
    app's "No target")."""
    q = report.get("quantize") or {}
    judged = q.get("validation") if q.get("target") is not None else None
    verdicts = [v["passed"] for v in (report.get("validation"), judged, report.get("providers_run")) if v]
    return all(verdicts) if verdicts else None


def _json_safe(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def write_report(path: str | Path, report: dict) -> Path:
    return write_json_atomic(path, _json_safe(report))


def summary_lines(report: dict) -> list[str]:
    lines: list[str] = []
    if report.get("validation"):
        lines += _validation_lines(report["validation"], "export")
    q = report.get("quantize")
    if q:
        lines.append(f"quantized ({q['mode']}) -> {q['path']}: {human_size(q['size_bytes'])}, "
                     f"{q['size_ratio']:.2f}x the float32 size")
        if q.get("kept_float_nodes"):
            lines.append(f"  kept in float to reach cosine >= {q['target']}: {', '.join(q['kept_float_nodes'])}")
        lines += ["  note: " + n for n in q.get("notes", [])]
        if q.get("validation"):
            lines += _validation_lines(q["validation"], "quantized", verdict=q.get("target") is not None)
    b = report.get("bench")
    if b:
        for m in b["models"]:
            lines.append(f"  {Path(m['path']).name}: p50 {m['p50_ms']:.3f} ms, p90 {m['p90_ms']:.3f} ms, "
                         f"{m['throughput']:.1f} samples/s"
                         + (f", spread {m['spread_pct']:.0f}%" if m.get("spread_pct") is not None else ""))
        if b.get("verdict"):
            lines.append(f"  {b['verdict']}, size x{b['size_ratio']:.3f}")
        lines += ["  note: " + n for n in b.get("notes", [])]
    if report.get("diff"):
        lines += ["before/after:"] + diff_lines(report["diff"])
    return lines


def _validation_lines(v: dict, what: str, verdict: bool = True) -> list[str]:
    """`verdict` False: the figures only (no accuracy target was set), no PASSED/FAILED, ok/BAD."""
    head = f"validation {'PASSED' if v['passed'] else 'FAILED'}" if verdict else "measured (no accuracy target)"
    lines = [f"{what} {head} against {v['reference_kind']} {Path(v['reference']).name} on {v['inputs']}"]
    for o in v["outputs"]:
        argmax = "" if o.get("argmax_agreement") is None or o.get("kind") != CLASSES else f", argmax {100 * o['argmax_agreement']:.1f}%"
        mark = ("ok " if o["passed"] else "BAD") if verdict else "   "
        lines.append(f"  {mark} {o['name']}: max abs diff {_num(o['max_abs_diff'], '.3g')}, "
                     f"cosine {_num(o['cosine'], '.6f')}{argmax}" + ("" if o["passed"] or not verdict else f" ({o['reason']})"))
        if o.get("samples") and v.get("precision") != "float32":
            s = o["samples"]
            lines.append(f"      per sample ({s['count']}): min {s['min']:.4f}, p5 {s['p5']:.4f}, mean {s['mean']:.4f}")
    jump = (v.get("tensors") or {}).get("first_jump")
    if v.get("tensors") and v["tensors"].get("tensors_compared"):
        lines.append(f"  the error jumps first at tensor {jump['tensor']}, made by {jump['node']} ({jump['op_type']})"
                     f": {_num(jump['added'], '+.4f')} relative error" if jump
                     else f"  no node adds {v['tensors']['threshold']:g} relative error or more (the error never jumps)")
    return lines


def _num(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)
