"""`--report REPORT.json`: checked before any work, like `-o` (util/out_paths).

Contract: `check_report(report, *inputs)` refuses a report path that is a device or a pipe, or
the same file as one of the run's inputs or outputs (a model, a checkpoint, a data file): a
report written at the end would replace it, with exit 0.
"""

from __future__ import annotations

from onnxport.core.util.out_paths import check_output


def check_report(report: str | None, *inputs: str | list[str] | None) -> None:
    if not report:
        return
    paths = [p for item in inputs if item for p in (item if isinstance(item, list) else [item])]
    check_output(report, {p: "a file this run reads or writes" for p in paths})
