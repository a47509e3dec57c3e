"""The names of the files an export with quantization and a report writes beside `OUT.onnx`.

One rule for the CLI, `post_export` and the app's export dialog (which shows both names before
the export): the float32 model stays `OUT.onnx`; the quantized one is `OUT.int8.onnx` (dynamic),
`OUT.qdq.onnx` (static), `OUT.fp16.onnx` or `OUT.int4.onnx`; the report `OUT.report.json`.
`check_companions` refuses them before any work where they would replace an input.
Kept apart from post_export so the dialog can use it without importing the quantizer.
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.util.out_paths import check_output

SUFFIXES = {"dynamic": ".int8.onnx", "static": ".qdq.onnx", "fp16": ".fp16.onnx", "int4": ".int4.onnx"}


def quantized_path(out_path: str | Path, mode: str) -> Path:
    """Where `post_export` writes the `mode` model of the export `out_path`."""
    out_path = Path(out_path)
    return out_path.with_name(out_path.stem + SUFFIXES[mode])


def report_path_for(out_path: str | Path) -> Path:
    """Where `post_export` writes the report of the export `out_path`."""
    out_path = Path(out_path)
    return out_path.with_name(out_path.stem + ".report.json")


def check_companions(out_path: str | Path, quantize: str | None, report: bool, reads: list) -> None:
    """Refuse, before any work, an export path, or its quantized model or report path (above),
    that is a pipe or one of `reads` (the model, checkpoints, calibration data)."""
    named = {p: "a file this run reads" for p in reads if p}
    check_output(out_path, named)  # the calibration data is read after the export is written
    if quantize:
        check_output(quantized_path(out_path, quantize), named)
    if quantize or report:
        check_output(report_path_for(out_path), named)
