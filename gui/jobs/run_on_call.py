"""The "Run on" calls as jobs (Qt-free `fn(progress, cancel)`): find the ONNX Runtime builds, and run
a model on one provider against CPU (core/runtimes/). Both start children of their own (one per
runtime), so they run in the window's worker, never inside another child."""

from __future__ import annotations

from pathlib import Path


def runtimes_job():
    def run(progress, cancel):
        from onnxport.core.runtimes.discovery import find_runtimes

        return find_runtimes()

    return run


def run_on_job(model: Path, provider: str, runtimes: list | None, options: dict | None = None, seconds: float = 1.0):
    """The report (core/evaluate/report.py) of `model` on `provider` against CPU; its
    `providers_run.node_names` are the file's nodes, for the preview's painting."""

    def run(progress, cancel):
        from onnxport.core.evaluate.report import build_report
        from onnxport.core.runtimes.run_on import painted_node_names, run_on_providers

        result = run_on_providers(model, [provider], options={provider: dict(options or {})}, runtimes=runtimes,
                                  seconds=seconds, progress=progress, cancel=cancel)
        report = build_report(providers=result)
        report["providers_run"]["node_names"] = painted_node_names(model)
        return report

    return run
