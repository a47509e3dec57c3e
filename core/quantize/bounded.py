"""Weight-only quantization of a model bigger than the memory it may take: nothing holds it whole.

Why: an LLM's float32 weights (8 GB for 2e9 parameters) do not fit beside everything else, and
every step that hands the model to ONNX Runtime (the load check, its pre-processing optimizer, the
first-run probe, the per-layer search, the reference run of the verdict, the per-node ranking)
holds all of it, some twice. For int4 of a model over `BOUNDED_BYTES`: the weights are read from
the source's files and quantized a weight at a time by the writer (int4.py); ORT's pre-processing,
the probe, the search and the ranking are skipped, and said so; the held-out verdict runs both
models a piece at a time (evaluate/segments.py) on the first `VERDICT_BATCHES` held-out batches
(generated ones of `VERDICT_BATCH` samples: a float LLM's run costs seconds per sequence).

Contract: `applies(mode, model_bytes)`; `note(model_bytes)`; `limited(part)`: the held-out part
the verdict runs; `verdict(...)`; `one_attempt(...)` -> the `LoopResult` of one attempt with the
excluded nodes in float, judged by `verdict` (met: passed, or no target).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from onnxport.core.evaluate.compare import Thresholds
from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.segments import validate_in_pieces
from onnxport.core.evaluate.validate import ValidationReport
from onnxport.core.export.staging import Staging
from onnxport.core.quantize import held_out
from onnxport.core.quantize.attempt_check import attempt_record
from onnxport.core.quantize.search import LoopResult
from onnxport.core.util.progress import Reporter

BOUNDED_BYTES = 1 << 30
BOUNDED_MODES = ("int4",)
VERDICT_BATCHES = 1
VERDICT_BATCH = 1  # samples in a generated batch


def applies(mode: str, model_bytes: int) -> bool:
    return mode in BOUNDED_MODES and model_bytes > BOUNDED_BYTES


def note(model_bytes: int) -> str:
    return (f"the model is {model_bytes / 2**30:.1f} GiB: its weights were read and quantized one at a time; ONNX "
            "Runtime's pre-processing, the per-layer accuracy search and the per-node error ranking were skipped "
            "(each holds the whole model in memory), and the verdict ran both models a piece at a time")


def limited(part: FeedSource) -> FeedSource:
    """The held-out part cut to its first `VERDICT_BATCHES` batches."""
    return held_out.first_batches(part, VERDICT_BATCHES)


def verdict(dst: Path, source: Path, feeds: FeedSource, thresholds: Thresholds, report: Reporter) -> ValidationReport:
    return validate_in_pieces(dst, source, feeds, thresholds, report=report)


def one_attempt(attempt: Callable[[list[str], Path], None], stage: Staging, name: str, excluded: list[str],
                verdict: Callable[[Path], ValidationReport], target: float | None) -> LoopResult:
    folder = stage.path("attempt0")
    folder.mkdir()
    dst = folder / name
    attempt(list(excluded), dst)
    final = verdict(dst)
    record = attempt_record(dst, [], final.outputs, final.passed, final.failures())
    return LoopResult(dst, [], [record], final.passed or target is None, final=final)
