"""float16 with an accuracy target: the first conversion is judged on the held-out inputs at once.

Why: nothing is tuned in a float16 conversion (the range check, fp16_ranges.py, reads the search
part only), so checking it on the search part first and then again on the held-out part ran both
models over 32 more samples for nothing (MiniLM: 3.3 s of a 10 s job).

Contract: `fp16_loop(...)` takes `search.layer_error_loop`'s arguments plus `verdict` (the held-out
check; None: that loop as it is). With it, it converts once and returns `LoopResult(...,
final=<that verdict>)` when the verdict passes; otherwise it starts `layer_error_loop` (the nodes
adding most error kept float32, checked on the search part), the held-out record first.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from onnxport.core.evaluate.compare import Thresholds
from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.validate import ValidationReport
from onnxport.core.export.staging import Staging
from onnxport.core.quantize.attempt_check import attempt_record
from onnxport.core.quantize.search import Attempt, LoopResult, attempt_file, layer_error_loop
from onnxport.core.util.progress import Reporter


def fp16_loop(attempt: Attempt, stage: Staging, name: str, prepared: Path, feeds: FeedSource, excluded: list[str],
              thresholds: Thresholds | None, op_types: set[str] | None, report: Reporter,
              verdict: Callable[[Path], ValidationReport] | None = None) -> LoopResult:
    """See the module docstring."""
    if verdict is None or thresholds is None:
        return layer_error_loop(attempt, stage, name, prepared, feeds, excluded, thresholds, op_types, report)
    report.check()
    report(0.0, "converting")
    dst = attempt_file(attempt, stage, name, 0, excluded, check=False)  # the fp16 attempt loads it; so does the verdict
    final = verdict(dst)
    record = attempt_record(dst, [], final.outputs, final.passed, final.failures(), inputs="held out")
    if final.passed:
        return LoopResult(dst, [], [record], True, final=final)
    shutil.rmtree(dst.parent, ignore_errors=True)
    outcome = layer_error_loop(attempt, stage, name, prepared, feeds, excluded, thresholds, op_types, report)
    outcome.attempts.insert(0, record)
    return outcome
