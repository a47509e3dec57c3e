"""The main window: open sources, pick outputs in the tree, export/quantize/validate in the worker.

Layout (gui/widgets/main_layout.py): the Preview (Netron, gui/preview/) in the middle; the outputs
tree (gui/widgets/outputs_pane.py) in a dock on the left; on the right a dock with tabs "Overview"
(what is loaded, the selected tensor, what the export keeps) and "Report" (the last export's
validation/quantization report), the log below it; progress and Cancel in the status bar
(gui/widgets/job_status.py). Every core call that
can take time is a closure from gui/jobs/core_calls.py run by the window's `JobRunner`
(gui/jobs/runner.py): one main job at a time, plus "newest answer only" side jobs (plan, filter);
the GUI thread only builds widgets from results. What is remembered between runs (recent files,
folders, window layout) is gui/widgets/app_state.py. The window changes no process-wide state:
that is gui/app.py's `tune_process`.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QMainWindow

from onnxport.core.evaluate.report import keepable_nodes
from onnxport.core.util.text import human_size
from onnxport.core.util.written_files import WrittenFiles
from onnxport.core.workflow.open_refusal import nothing_to_open
from onnxport.core.workflow.session import ModelSession

from .dialogs.deploy_flow import DeployFlow
from .dialogs.error_dialog import error_text
from .dialogs.export_dialog import export_dialog_for
from .dialogs.help_menu import add_help_menu
from .dialogs.import_flow import ImportFlow
from .dialogs.job_failure import on_job_failed
from .dialogs.run_on_flow import RunOnFlow
from .jobs import core_calls
from .jobs.late_types import fill_types_later
from .jobs.runner import JobRunner
from .jobs.worker import Job
from .preview import make_preview
from .preview.compare_window import CompareWindow, open_compare
from .preview.error_overlay import ErrorOverlay
from .widgets.app_state import AppState
from .widgets.cut_menu import StartHere
from .widgets.export_gate import gate_export
from .widgets.job_status import JobStatus
from .widgets.log_dock import LogDock, without_table
from .widgets.main_actions import build_actions
from .widgets.main_layout import add_view_menu, fit_width, lay_out
from .widgets.outputs_pane import OutputsPane
from .widgets.panels import export_html, plan_html, sources_html, tensor_html
from .widgets.tabs import OverviewTab, ReportTab
from .widgets.tree_model import OutputsTreeModel, Tree
from .widgets.turns import later

PLAN_DEBOUNCE_MS = 150


class MainWindow(QMainWindow):
    errorShown = Signal(str)  # noqa: N815 - the one-line text of every error dialog (for tests and logs)
    loaded = Signal()
    exportFinished = Signal(object)  # noqa: N815 - (ExportResult, PostExportResult or None), once shown
    jobEnded = Signal(str, str)  # noqa: N815 - (job name, "returned" | "errored" | "cancelled")
    treeShown = Signal(float)  # noqa: N815 - seconds the GUI thread took to show an opened model's tree

    def __init__(self, settings: QSettings | None = None) -> None:
        super().__init__()
        self.state = AppState(settings)
        self.settings = self.state.settings
        self.setWindowTitle("onnxport")
        self.setAcceptDrops(True)
        self.session: ModelSession | None = None
        self.paths: list[Path] = []
        self.model: OutputsTreeModel | None = None
        self.last_export: Path | None = None
        self.last_quantized: Path | None = None
        self._last_choices: tuple[Path, object] | None = None  # (model, ExportChoices) of the last export
        self._export_watch: WrittenFiles | None = None
        self.runner = JobRunner(self)
        self.log_dock = LogDock(self)  # the log (gui/widgets/log_dock.py); first: everything logs
        self.log, self.log_line, self.log_lines = self.log_dock.view, self.log_dock.log_line, self.log_dock.log_lines
        self.log_lines(self.state.dropped)  # the settings file's bad entries, said once (app_state.py)
        self.import_flow = ImportFlow(self, self.runner, self.log_line, self.open_paths)
        self.deploy_flow = DeployFlow(self, self.runner, self.log_line, lambda: self.last_export)
        self.run_on_flow = RunOnFlow(self, self.runner, self.log_line, lambda report: self._validated(report))
        self._build_widgets()
        build_actions(self)  # gui/widgets/main_actions.py
        add_view_menu(self, [self.outputs_dock, self.details_dock, self.log_dock])
        add_help_menu(self)  # gui/dialogs/help_menu.py
        self._connect_runner()
        self._plan_timer = QTimer(self, singleShot=True, interval=PLAN_DEBOUNCE_MS, timeout=self._plan)
        self.state.restore_window(self)
        self._update_actions()

    # --- construction --------------------------------------------------------------------------
    def _build_widgets(self) -> None:
        self.left = OutputsPane()
        self.tree = self.left.tree
        self.left.filterChanged.connect(self._apply_filter)
        self.left.allow_training.toggled.connect(self._allow_training_only)
        self.overview = OverviewTab()
        self.sources_panel, self.plan_panel, self.details_panel, self.weight_panel = self.overview.panels()
        self.report_tab = ReportTab()
        self.result_panel, self.report_view = self.report_tab.result_panel, self.report_tab.report_view
        self.report_view.requantizeRequested.connect(self.requantize)
        self.preview = make_preview()
        self.error_overlay = ErrorOverlay(self.preview, self.report_view)  # the report's error map on the graph
        self.error_overlay.nodeClicked.connect(self.report_view.accuracy.show_node)
        self.cut = StartHere(self, self._checked_changed, self.tree, self.preview)  # "Start here" (cut_menu.py)
        self.resize(1400, 860)
        self.tabs, self.outputs_dock, self.details_dock = lay_out(  # the graph in the middle: main_layout.py
            self, self.left, self.overview, self.report_tab, self.preview, self.log_dock)
        self.job_status = JobStatus(self.statusBar(), self.cancel_job)

    def _connect_runner(self) -> None:
        self.runner.started.connect(lambda name: (self.job_status.busy(name), self._update_actions()))
        self.runner.progress.connect(self.job_status.show_progress)
        self.runner.message.connect(self.log_line)
        self.runner.failed.connect(lambda *failure: on_job_failed(self, *failure))  # job_failure.py
        self.runner.ended.connect(self._kept_after_cancel)  # before `jobEnded`: its listeners see the state
        self.runner.ended.connect(self.jobEnded)
        self.runner.finished.connect(lambda _name: (self.job_status.idle(), self._update_actions()))

    # --- opening -------------------------------------------------------------------------------
    def open_dialog(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Open model and checkpoint", self.state.open_folder,
                                                "Models and checkpoints (*)")
        if files:
            self.open_paths(files)

    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt override
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:  # Shift: compare, not open
                self.compare_with(paths)
            else:
                self.open_paths(paths)

    def compare_dialog(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Compare with", str(self.state.open_folder), "Models and checkpoints (*)")
        if files:
            self.compare_with(files)

    def compare_with(self, paths) -> CompareWindow | None:
        return open_compare(self, self.session, paths)  # gui/preview/compare_window.py

    def open_paths(self, paths) -> None:
        paths = [Path(p) for p in paths]
        self.state.open_folder = paths[0].parent
        self.log_line("opening " + ", ".join(p.name for p in paths))
        self.runner.run("open", core_calls.open_job(paths), lambda result: self._loaded(paths, result))

    def _loaded(self, paths: list[Path], result: tuple[ModelSession, Tree | None]) -> None:
        loaded, tree = result
        if loaded.model_path is None or loaded.index is None:  # what was found, in the CLI's words
            raise nothing_to_open(paths[0] if len(paths) == 1 else "the files opened", loaded,
                                  "import PyTorch programs with File > Import from PyTorch (Ctrl+I)")
        t0 = time.perf_counter()
        self.session, self.paths, self.cut.starts = loaded, paths, ()
        old, self.model = self.model, OutputsTreeModel(loaded.index, self, tree=tree)
        self.model.checkedChanged.connect(self._checked_changed)
        self.left.show_model(self.model)
        if old is not None:
            old.deleteLater()
        self.tree.selectionModel().currentChanged.connect(self._current_changed)
        self.sources_panel.set_html(sources_html(loaded))
        self.details_panel.set_html(tensor_html(None))
        self.report_tab.clear()  # the previous model's export and report are not this one's
        self.last_export = self.last_quantized = None
        self.state.remember_recent(paths)
        self.state.fill_recent_menu(self.recent_menu, self.open_paths)
        self.setWindowTitle(f"onnxport - {loaded.model_path.name}")
        self.tree.viewport().repaint()
        seconds = time.perf_counter() - t0  # the GUI thread's share of opening
        self.log_line(f"loaded {loaded.model_path.name}: {len(loaded.index)} tensors"
                      f" (tree shown in {1000 * seconds:.0f} ms)")
        self.treeShown.emit(seconds)
        if loaded.alignment is not None:
            self.log_line("parameter names fitted to the model: " + loaded.alignment.how())
        if loaded.match is not None:
            self.log_line("parameters: " + loaded.match.summary())
        self._checked_changed()
        self._update_actions()
        fill_types_later(self.runner, loaded.index, self.model, self._typed)  # gui/jobs/late_types.py
        self.loaded.emit()

    def _typed(self, model: OutputsTreeModel) -> None:
        """The shapes the open did not wait for arrived: repaint the tree and the tensor's details."""
        if model is self.model:
            model.types_changed()
            self.details_panel.set_html(tensor_html(model.info(self.tree.currentIndex())))

    # --- tree ----------------------------------------------------------------------------------
    def _apply_filter(self) -> None:
        """Rebuild the tree for the filter in a side job; only the newest answer is shown."""
        if self.model is None:
            return
        wanted = self.left.wanted_filter()
        if wanted == self.model.filter():
            return
        model = self.model
        self.runner.side("filter", core_calls.filter_job(model.tensor_index, *wanted),
                         lambda tree: self._filtered(model, wanted, tree))

    def _filtered(self, model: OutputsTreeModel, wanted: tuple[str, bool], tree: Tree) -> None:
        if model is self.model:
            model.set_filter(*wanted, tree=tree)
            self.left.show_filtered()

    def _allow_training_only(self, on: bool) -> None:
        if self.model is not None:
            self.model.allow_training_only = on
            self.model.layoutChanged.emit()

    def _current_changed(self, current, _previous) -> None:
        info = self.model.info(current) if self.model else None
        self.overview.show_tensor(info, self.runner, self.session)  # a weight: its numbers too, in a side job
        if info is not None and hasattr(self.preview, "focus_node"):
            self.preview.focus_node(info.name)

    def settled(self) -> bool:
        """No plan waiting for its debounce and no side job running: what a selection set off is done."""
        return not self._plan_timer.isActive() and not self.runner.side_jobs

    def _checked_changed(self) -> None:
        outputs = self.model.checked_outputs() if self.model else []
        self.left.show_checked(outputs)
        self._update_actions()
        self._plan_timer.start()
        if outputs and self.session is not None and hasattr(self.preview, "set_model"):
            tensors = self.session.index.tensors
            self.preview.set_model(self.session, outputs, lambda name: getattr(tensors.get(name), "producer", None),
                                   self.cut.starts)

    def _plan(self) -> None:
        """Recompute "Export keeps" in a side job; only the newest answer is shown."""
        if self.session is None or self.model is None:
            return
        outputs = self.model.checked_outputs()
        if not outputs:
            self.runner.drop("plan")  # an answer in flight is for outputs no longer checked
            self.plan_panel.set_html(plan_html(None))
            return
        self.runner.side("plan", core_calls.plan_job(self.session, outputs, self.cut.starts),
                         lambda plan: self.plan_panel.set_html(plan_html(plan)),
                         lambda exc: self.plan_panel.set_html(plan_html(None, error_text(exc))))

    # --- export / validate ---------------------------------------------------------------------
    def export_dialog(self, quantize: str | None = None) -> None:
        """The Export dialog (`quantize`: the mode to start with, "int8": the one that can help);
        this model's last choices come back, failed or not."""
        if self.session is None or self.model is None or self.busy:
            return
        last = self._last_choices
        dialog = export_dialog_for(self, self.session, self.model.checked_outputs(), quantize, self.settings,
                                   last[1] if last and last[0] == self.session.model_path else None)
        dialog.accepted.connect(lambda: self.start_export(dialog.choices()))
        dialog.open()

    def start_export(self, choices, allowed: frozenset[str] = frozenset()) -> None:
        """Export with the dialog's `choices` and the checkpoint policy's choices `allowed` (a
        refusal one of them lifts is asked about: dialogs/job_failure.py)."""
        outputs = self.model.checked_outputs()
        self._export_asked = (choices, allowed)
        self._last_choices = (self.session.model_path, choices)  # shown again by the next Export dialog
        self.log_line(f"exporting {', '.join(outputs)} to {choices.path}")
        self._export_watch = WrittenFiles(choices.path)  # what a Cancel leaves in place (README: Cancel)
        self.runner.run("export", core_calls.export_job(self.session, outputs, choices, allowed, self.cut.starts),
                        lambda result: self._exported(result, choices))

    def _kept_after_cancel(self, name: str, how: str) -> None:
        """A Cancel after the float model was put in place (during the quantization, say) keeps it,
        complete: the log names it (the job's line), and it is the last export Validate and Deploy use."""
        watch = self._export_watch
        if name != "export" or how != "cancelled" or watch is None or watch.out not in watch.written():
            return
        self.last_export, self.last_quantized = watch.out, None
        self.log_line(f"{watch.out.name} (float32) is kept, complete: Validate and Deploy use it")
        self._update_actions()

    def _exported(self, result, deploy_choices=None) -> None:
        """Take the export's result and show it in stages, each in an event-loop turn of its own
        (widgets/turns.py `later`): the report's widgets, then the Report tab brought forward,
        each with its own layout and paint (in one turn, or chained with posted events, they froze
        the window: docs/performance.md). `exportFinished` says it is shown; then `deploy_choices`' deploy."""
        export, post = result  # ExportResult, PostExportResult | None
        self.last_export = export.path
        self.last_quantized = post.quantize.path if post is not None and post.quantize is not None else None
        self.log_lines([f"wrote {export.path} ({human_size(export.size_bytes)}, {export.nodes} nodes, "
                        f"{export.folded} folded, {export.seconds:.2f} s)",
                        *(without_table(post.summary_lines) if post is not None else ())])
        self._update_actions()
        later(self, lambda: self._show_export(result, deploy_choices))

    def _show_export(self, result, deploy_choices=None) -> None:
        export, post = result
        self.result_panel.set_html(export_html(export, post))
        self.report_view.set_report(post.report if post is not None else core_calls.export_only_report(export))
        later(self, lambda: (self._show_report_tab(), self.exportFinished.emit(result),
                             self.deploy_flow.after_export(result, deploy_choices)))

    def _show_report_tab(self) -> None:
        self.tabs.setCurrentWidget(self.report_tab)
        fit_width(self, self.details_dock, self.report_tab.widget())  # the report, without a side scroll

    def validate_last(self) -> None:
        if self.last_export is None:
            self.export_dialog()
            return
        self.log_line(f"validating {self.last_export.name}")
        self.runner.run("validate", core_calls.validate_job(self.session, self.last_export), self._validated)

    def _validated(self, report: dict) -> None:
        passed = report.get("passed")
        self.log_line("validation " + ("PASSED" if passed else "FAILED" if passed is False else "not run"))
        later(self, lambda: (self.report_view.set_report(report), later(self, self._show_report_tab)))  # as `_exported`

    def requantize(self, nodes: list[str]) -> None:
        """The report's "keep these in float and quantize again"."""
        if self.last_quantized is None or self.last_export is None or not nodes:
            return
        nodes = keepable_nodes(self.report_view.report, nodes)  # a ranked node stands for its fused group
        self.log_line(f"quantizing {self.last_export.name} again, keeping {', '.join(nodes)} in float")
        self.runner.run("requantize", core_calls.requantize_job(self.last_quantized, self.last_export, nodes),
                        self._validated)

    # --- PyTorch import --------------------------------------------------------------------------
    def import_source(self, source: Path) -> None:
        """Import `source` (PyTorch) and open what it wrote: gui/dialogs/import_flow.py."""
        self.import_flow.start(source)

    # --- the main job --------------------------------------------------------------------------
    @property
    def job(self) -> Job | None:
        """The main job running, if any."""
        return self.runner.job

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def cancel_job(self) -> None:
        job = self.runner.cancel()
        if job is not None:
            self.job_status.text.setText(f"{job.name}: already written, finishing…" if job.committed
                                         else f"cancelling {job.name}…")

    def _update_actions(self) -> None:
        ready = self.session is not None and not self.busy
        has_outputs = bool(self.model and self.model.checked_outputs())
        gate_export(self, ready and has_outputs)  # off on a mismatch, the reason in its tooltip
        self.validate_action.setEnabled(ready)
        self.run_on_action.setEnabled(not self.busy and self.run_on_flow.model() is not None)
        self.open_action.setEnabled(not self.busy)
        self.import_action.setEnabled(not self.busy)
        self.deploy_action.setEnabled(not self.busy)
        self.cancel_action.setEnabled(self.busy)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        """Once shown, start the preview's page while nothing else runs (gui/preview/preview_panel.py)."""
        super().showEvent(event)
        if hasattr(self.preview, "warm_up"):
            QTimer.singleShot(0, self.preview, self.preview.warm_up)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        self.runner.cancel()
        self.runner.drop_all()
        self.state.save_window(self)
        if hasattr(self.preview, "shutdown"):
            self.preview.shutdown()
        super().closeEvent(event)
