"""The Deploy step after Export: the dialog, the deploy job, its report in the window.

`after_export` is the Export dialog's "Deploy to": the export's final model deployed beside it,
its shapes fixed, as the CLI's `export --target T --shape --dim` does.
Kept apart from the main window, which hands over its `JobRunner`, its log and where its last
export went (the model the dialog proposes). The result's lines go to the log and, as plain text,
to the Report tab's result panel; `deployed` is emitted with the core's `DeployResult`.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from onnxport.core.deploy.targets import deployed_name

from ..jobs.deploy_call import DeployChoices, deploy_job
from ..jobs.runner import JobRunner


class DeployFlow(QObject):
    deployed = Signal(object)  # the core's DeployResult, once shown

    def __init__(self, parent: QWidget, runner: JobRunner, log: Callable[[str], None],
                 last_export: Callable[[], Path | None]) -> None:
        super().__init__(parent)
        self.window = parent
        self.runner = runner
        self.log = log
        self.last_export = last_export
        self.dialog = None

    def choose(self) -> None:
        from .deploy_dialog import DeployDialog

        paths = getattr(self.window, "paths", None) or []
        model = self.last_export() or next((Path(p) for p in paths if str(p).endswith(".onnx")), None)
        self.dialog = DeployDialog(self.window, model, getattr(self.window, "settings", None))
        self.dialog.accepted.connect(lambda: self.start(self.dialog.choices()))
        self.dialog.open()

    def start(self, choices) -> None:
        self.log(f"deploying {choices.model.name} for {choices.target}")
        self.runner.run("deploy", deploy_job(choices), self._deployed)

    def after_export(self, result, choices) -> None:
        """Deploy the final model of an export (`result`: ExportResult, PostExportResult or None; the
        quantized model if any) for `choices.target` (the Export dialog's), beside it; none: nothing."""
        if choices is None or not getattr(choices, "target", None):
            return
        export, post = result
        final = Path(post.quantize.path if post is not None and post.quantize is not None else export.path)
        self.start(DeployChoices(final, choices.target, final.with_name(deployed_name(final.stem, choices.target)),
                                 list(choices.deploy_shapes), list(choices.deploy_dims)))

    def _deployed(self, result) -> None:
        lines = result.summary_lines()
        for line in lines:
            self.log(line)
        panel = getattr(self.window, "result_panel", None)
        if panel is not None:
            text = "<br>".join(html.escape(line) for line in lines)
            panel.set_html(f"<b>Deployed for {html.escape(result.target)}</b><br>{text}")
            tabs, tab = getattr(self.window, "tabs", None), getattr(self.window, "report_tab", None)
            if tabs is not None and tab is not None:
                tabs.setCurrentWidget(tab)
        self.deployed.emit(result)
