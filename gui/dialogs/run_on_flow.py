"""The "Run on" step: the dialog, the runtimes found once per window, the run, its report.

Kept apart from the main window, which hands over its `JobRunner`, its log and how to show a
report; the model run is the window's last export, else its opened ONNX file (`model`). The runtimes are found in a side job the first time
the dialog opens (children in each environment, off the GUI thread) and kept; the run is the main
job (gui/jobs/run_on_call.py). Its report goes to the Report tab, whose change repaints the
preview by provider (gui/preview/provider_overlay.py); its summary goes to the log.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from ..jobs.run_on_call import run_on_job, runtimes_job
from ..jobs.runner import JobRunner


class RunOnFlow(QObject):
    shown = Signal(object)  # the report, once handed to the Report tab

    def __init__(self, parent: QWidget, runner: JobRunner, log: Callable[[str], None],
                 show_report: Callable[[dict], None]) -> None:
        super().__init__(parent)
        self.window, self.runner, self.log, self.show_report = parent, runner, log, show_report
        self.runtimes: list | None = None
        self.dialog = None

    def model(self) -> Path | None:
        """The window's last export, else its opened ONNX file, else None."""
        session = getattr(self.window, "session", None)
        opened = getattr(session, "model_path", None)
        last = getattr(self.window, "last_export", None)
        return last or (Path(opened) if opened and str(opened).endswith(".onnx") else None)

    def choose(self) -> None:
        from .run_on_dialog import RunOnDialog

        model = self.model()
        if model is None:
            self.log("run on: open an ONNX model or export one first")
            return
        self.dialog = dialog = RunOnDialog(self.window, model.name)
        dialog.accepted.connect(lambda: self.start(model, *dialog.choice()))
        if self.runtimes is None:
            self.runner.side("runtimes", runtimes_job(), self._found, on_error=dialog.failed, serial=False)
        else:
            dialog.set_runtimes(self.runtimes)
        dialog.open()

    def _found(self, runtimes: list) -> None:
        self.runtimes = runtimes
        if self.dialog is not None:
            self.dialog.set_runtimes(runtimes)

    def start(self, model: Path, provider: str, options: dict) -> None:
        self.log(f"running {model.name} on {provider} and on CPU")
        self.runner.run("run on", run_on_job(model, provider, self.runtimes, options), self._done)

    def _done(self, report: dict) -> None:
        for p in report.get("providers") or []:
            self.log(f"{p['provider']}: " + (p["error"] or f"{p['nodes_on_provider']} nodes, {p['nodes_on_cpu']} "
                                                         f"fell back to CPU, p50 {p['p50_ms']:.3f} ms"))
        self.show_report(report)
        self.shown.emit(report)
