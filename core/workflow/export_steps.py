"""The steps of `export [--validate] [--quantize MODE]` and their share of one progress bar.

One table for the CLI and the app, so both show one monotonic bar whose message names the step:
"exporting: writing parameters", "validating: comparing outputs", "quantizing: pre-processing",
"benchmarking: measuring", and "done" only at the very end. The weights are the steps' usual
cost relative to the export (quantizing runs ONNX Runtime's pre-processing, the accuracy search
and its own validation). `post_export` splits the span it is given with `post_steps`, the same
names and weights, so the front end's bar and post_export's agree.
"""

from __future__ import annotations

WEIGHTS = {"exporting": 1.0, "validating": 1.0, "quantizing": 4.0, "benchmarking": 1.5, "writing the report": 0.1}


def post_steps(validate: bool, quantize: str | None) -> list[str]:
    """The steps `post_export` runs: `validate` when the export was not validated already."""
    return (["validating"] if validate else []) + (["quantizing", "benchmarking"] if quantize else []) + [
        "writing the report"]


def export_steps(validate: bool, quantize: str | None) -> list[tuple[str, float]]:
    """All the steps of an export run: the export, its validation (before the export is put in
    place), then what post_export does (when anything: quantize or validate)."""
    names = ["exporting"] + (["validating"] if validate else [])
    if validate or quantize:
        names += post_steps(False, quantize)
    return [(name, WEIGHTS[name]) for name in names]


def weighted(names: list[str]) -> list[tuple[str, float]]:
    return [(name, WEIGHTS[name]) for name in names]
