"""The main window: open sources, pick outputs in the tree, export/quantize/validate in the worker.

Layout: the outputs tree (with filter) on the left; on the right tabs "Overview" (what is loaded,
the selected tensor, what the export keeps), "Preview" (Netron, when gui/preview_panel.py is
there) and "Report" (the last export's validation/quantization report); a log dock at the
bottom; progress and Cancel in the status bar. Every core call that can take time runs as a
`Job` (gui/worker.py); the GUI thread only builds widgets from results.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import shiboken6
from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from onnxport.core.util.errors import OnnxportError
from onnxport.core.workflow.sources import LoadedSources

from . import jobs
from .error_dialog import error_text, show_error
from .export_dialog import ExportDialog
from .panels import TextPanel, export_html, plan_html, sources_html, tensor_html
from .report_view import ReportView
from .tree_model import OUTPUTS_GROUP, OutputsTreeModel, Tree
from .worker import Job

MAX_RECENT = 8
SWITCH_INTERVAL_S = 0.0005
EMPTY_HINT = ("<h2>Drop an eval model and its checkpoint here</h2>"
              "<p>…or use <b>File &gt; Open</b> (Ctrl+O). onnxport works out which file is the model<br>"
              "and which holds the trained parameters. Any ONNX model works too.</p>")


class MainWindow(QMainWindow):
    errorShown = Signal(str)  # noqa: N815 - the one-line text of every error dialog (for tests and logs)
    loaded = Signal()
    exportFinished = Signal(object)  # noqa: N815 - (ExportResult, post-export dict or None)
    jobEnded = Signal(str, str)  # noqa: N815 - (job name, "returned" | "errored" | "cancelled")

    def __init__(self, settings: QSettings | None = None) -> None:
        super().__init__()
        # Each call from Qt into Python (a paint asking the tree model for data) must take the
        # GIL; while a worker runs Python it gives the GIL up only every switch interval (5 ms
        # by default), so a repaint with dozens of such calls stalls for 50+ ms. 0.5 ms keeps
        # the GUI thread's waits short at a small cost to the worker.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self.settings = settings or QSettings()
        self.setWindowTitle("onnxport")
        self.setAcceptDrops(True)
        self.sources: LoadedSources | None = None
        self.paths: list[Path] = []
        self.model: OutputsTreeModel | None = None
        self.job: Job | None = None
        self.last_export: Path | None = None
        self.last_quantized: Path | None = None
        self.last_tree_seconds = 0.0
        self._generations: dict[str, int] = {}
        self._side_jobs: set[Job] = set()
        self._build_widgets()
        self._build_actions()
        self._plan_timer = QTimer(self, singleShot=True, interval=150, timeout=self._plan)
        self._filter_timer = QTimer(self, singleShot=True, interval=200, timeout=self._apply_filter)
        self.restoreGeometry(self.settings.value("window/geometry", b""))
        self.restoreState(self.settings.value("window/state", b""))
        self._update_actions()

    # --- construction --------------------------------------------------------------------------
    def _build_widgets(self) -> None:
        self.filter_edit = QLineEdit(placeholderText="Filter tensors by name…", clearButtonEnabled=True)
        self.filter_edit.textChanged.connect(lambda _: self._filter_timer.start())
        self.outputs_only = QCheckBox("Graph outputs only")
        self.outputs_only.toggled.connect(lambda _: self._apply_filter())
        self.allow_training = QCheckBox("Allow training-only")
        self.allow_training.setToolTip("Let loss and label tensors be checked (they are rarely wanted)")
        self.allow_training.toggled.connect(self._allow_training_only)
        filters = QHBoxLayout()
        filters.addWidget(self.filter_edit, 1)
        filters.addWidget(self.outputs_only)
        filters.addWidget(self.allow_training)
        self.tree = QTreeView(uniformRowHeights=True, alternatingRowColors=True)
        self.tree.setObjectName("outputsTree")
        self.checked_label = QLabel()
        tree_box = QWidget()
        tree_layout = QVBoxLayout(tree_box)
        tree_layout.setContentsMargins(0, 0, 0, 0)
        tree_layout.addLayout(filters)
        tree_layout.addWidget(self.tree, 1)
        tree_layout.addWidget(self.checked_label)
        self.empty = QLabel(EMPTY_HINT, alignment=Qt.AlignCenter)
        self.empty.setObjectName("emptyHint")
        self.left = QStackedWidget()
        self.left.addWidget(self.empty)
        self.left.addWidget(tree_box)

        self.sources_panel = TextPanel("Loaded", sources_html(None))
        self.details_panel = TextPanel("Selected tensor", tensor_html(None))
        self.plan_panel = TextPanel("Export keeps", plan_html(None))
        overview = QWidget()
        over_layout = QVBoxLayout(overview)
        for panel in (self.sources_panel, self.plan_panel, self.details_panel):
            over_layout.addWidget(panel)
        over_layout.addStretch(1)
        self.report_view = ReportView()
        self.report_view.requantizeRequested.connect(self.requantize)
        self.result_panel = TextPanel("Last export", "<i>Nothing exported yet.</i>")
        report_tab = QWidget()
        report_layout = QVBoxLayout(report_tab)
        report_layout.addWidget(self.result_panel)
        report_layout.addWidget(self.report_view, 1)
        self.report_tab = report_tab
        self.tabs = QTabWidget()
        self.tabs.addTab(overview, "Overview")
        self.preview = _make_preview()
        self.tabs.addTab(self.preview, "Preview")
        self.tabs.addTab(report_tab, "Report")
        self.splitter = QSplitter(Qt.Horizontal)
        self.splitter.addWidget(self.left)
        self.splitter.addWidget(self.tabs)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.setCentralWidget(self.splitter)

        self.log = QPlainTextEdit(readOnly=True)
        self.log.setMaximumBlockCount(5000)
        dock = QDockWidget("Log", self)
        dock.setObjectName("logDock")
        dock.setWidget(self.log)
        self.addDockWidget(Qt.BottomDockWidgetArea, dock)
        self.resizeDocks([dock], [150], Qt.Vertical)
        self.progress = QProgressBar(maximumWidth=260, textVisible=True)
        # progress and Cancel stay in place (disabled when idle): showing/hiding them would
        # re-layout and repaint the whole window at the start of every job
        self.progress.setEnabled(False)
        self.progress.setFormat("")
        self.status_text = QLabel()
        # a changing message must not re-layout (and so repaint) the whole window on every beat
        self.status_text.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.cancel_button = QPushButton("Cancel", clicked=self.cancel_job)
        self.cancel_button.setEnabled(False)
        self.statusBar().addWidget(self.status_text, 1)
        self.statusBar().addPermanentWidget(self.progress)
        self.statusBar().addPermanentWidget(self.cancel_button)
        self.resize(1400, 860)

    def _build_actions(self) -> None:
        def action(text, slot, shortcut=None, tip=""):
            act = QAction(text, self, triggered=slot, statusTip=tip)
            if shortcut:
                act.setShortcut(shortcut)
            return act

        self.open_action = action("&Open…", self.open_dialog, QKeySequence.Open, "Open a model and checkpoint")
        self.export_action = action("&Export…", self.export_dialog, "Ctrl+E", "Export the checked outputs")
        self.quantize_action = action("&Quantize…", lambda: self.export_dialog("dynamic"), "Ctrl+Shift+Q",
                                      "Export and quantize")
        self.validate_action = action("&Validate", self.validate_last, "Ctrl+Shift+V",
                                      "Validate the last export against the eval graph + checkpoint")
        self.cancel_action = action("&Cancel", self.cancel_job, "Esc", "Stop the running job")
        self.import_action = action("&Import from PyTorch…", self.import_dialog, "Ctrl+I",
                                    "TorchScript .pt, torch.export .pt2 or a Hugging Face folder")
        self.quit_action = action("&Quit", self.close, QKeySequence.Quit)
        menu = self.menuBar().addMenu("&File")
        menu.addAction(self.open_action)
        menu.addAction(self.import_action)
        self.recent_menu = menu.addMenu("Open &Recent")
        self._fill_recent()
        menu.addSeparator()
        menu.addAction(self.quit_action)
        model_menu = self.menuBar().addMenu("&Model")
        for act in (self.export_action, self.quantize_action, self.validate_action, self.cancel_action):
            model_menu.addAction(act)
        toolbar = self.addToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        for act in (self.open_action, self.export_action, self.quantize_action, self.validate_action):
            toolbar.addAction(act)

    # --- opening -------------------------------------------------------------------------------
    def open_dialog(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Open model and checkpoint", self.settings.value(
            "open/folder", str(Path.home())), "Models and checkpoints (*)")
        if files:
            self.open_paths(files)

    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt override
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.open_paths(paths)

    def open_paths(self, paths) -> None:
        paths = [Path(p) for p in paths]
        self.settings.setValue("open/folder", str(paths[0].parent))
        self.log_line("opening " + ", ".join(p.name for p in paths))
        self.run_job("open", jobs.open_job(paths), lambda result: self._loaded(paths, result))

    def _loaded(self, paths: list[Path], result: tuple[LoadedSources, Tree | None]) -> None:
        loaded, tree = result
        if loaded.model_path is None or loaded.index is None:
            raise OnnxportError("no ONNX model among the files opened",
                                hint="add the eval model (.onnx) next to the checkpoint")
        t0 = time.perf_counter()
        self.sources, self.paths = loaded, paths
        old = self.model
        self.model = OutputsTreeModel(loaded.index, self, tree=tree)
        self.model.checkedChanged.connect(self._checked_changed)
        self.tree.setModel(self.model)
        if old is not None:
            old.deleteLater()
        self.tree.selectionModel().currentChanged.connect(self._current_changed)
        self.tree.setColumnWidth(0, 380)
        self._expand_outputs()
        self.left.setCurrentIndex(1)
        self.sources_panel.set_html(sources_html(loaded))
        self.details_panel.set_html(tensor_html(None))
        self._remember_recent(paths)
        self.setWindowTitle(f"onnxport - {loaded.model_path.name}")
        self.tree.viewport().repaint()
        self.last_tree_seconds = time.perf_counter() - t0  # the GUI thread's share of opening (bench)
        self.log_line(f"loaded {loaded.model_path.name}: {len(loaded.index)} tensors"
                      f" (tree shown in {1000 * self.last_tree_seconds:.0f} ms)")
        if loaded.alignment is not None:
            self.log_line("parameter names fitted to the model: " + loaded.alignment.how())
        if loaded.match is not None:
            self.log_line("parameters: " + loaded.match.summary())
        self._checked_changed()
        self._update_actions()
        self.loaded.emit()

    # --- tree ----------------------------------------------------------------------------------
    def _apply_filter(self) -> None:
        """Rebuild the tree for the filter in the worker; only the newest answer is shown."""
        if self.model is None:
            return
        wanted = (self.filter_edit.text(), self.outputs_only.isChecked())
        if wanted == self.model.filter():
            return
        model = self.model
        self._side_job(jobs.filter_job(model.tensor_index, *wanted), "filter",
                       lambda tree: self._filtered(model, wanted, tree))

    def _filtered(self, model: OutputsTreeModel, wanted: tuple[str, bool], tree: Tree) -> None:
        if model is not self.model:
            return
        model.set_filter(*wanted, tree=tree)
        if wanted[0] and model.visible_tensor_count() <= 2000:
            self.tree.expandAll()
        else:
            self._expand_outputs()

    def _expand_outputs(self) -> None:
        for index in self.model.group_indexes(depth=1):
            if self.model.node(index).label == OUTPUTS_GROUP:
                self.tree.expand(index)

    def _allow_training_only(self, on: bool) -> None:
        if self.model is not None:
            self.model.allow_training_only = on
            self.model.layoutChanged.emit()

    def _current_changed(self, current, _previous) -> None:
        info = self.model.info(current) if self.model else None
        self.details_panel.set_html(tensor_html(info))
        if info is not None and hasattr(self.preview, "focus_node"):
            self.preview.focus_node(info.name)

    def _checked_changed(self) -> None:
        outputs = self.model.checked_outputs() if self.model else []
        self.checked_label.setText(f"{len(outputs)} output(s) checked: " + ", ".join(outputs[:8])
                                   + (" …" if len(outputs) > 8 else ""))
        self._update_actions()
        self._plan_timer.start()
        if outputs and self.sources is not None and hasattr(self.preview, "set_model"):
            tensors = self.sources.index.tensors
            self.preview.set_model(str(self.sources.model_path), outputs, tuple(self.sources.params or ()),
                                   lambda name: getattr(tensors.get(name), "producer", None))

    def _plan(self) -> None:
        """Recompute "Export keeps" in the worker; only the newest answer is shown."""
        if self.sources is None or self.model is None:
            return
        outputs = self.model.checked_outputs()
        if not outputs:
            self._generations["plan"] = self._generations.get("plan", 0) + 1  # drop answers in flight
            self.plan_panel.set_html(plan_html(None))
            return
        self._side_job(jobs.plan_job(self.sources, outputs), "plan",
                       lambda plan: self.plan_panel.set_html(plan_html(plan)),
                       lambda exc: self.plan_panel.set_html(plan_html(None, error_text(exc))))

    def _side_job(self, fn, name: str, on_result, on_error=None) -> None:
        """A quiet job next to the main one (plan, filter): no progress bar, no cancel; only the
        newest answer of each `name` is used, older ones are dropped when they arrive."""
        self._generations[name] = generation = self._generations.get(name, 0) + 1

        def current() -> bool:
            return self._alive() and self._generations.get(name) == generation

        job = Job(fn, name)
        job.signals.returned.connect(lambda result: current() and on_result(result))
        if on_error is not None:
            job.signals.errored.connect(lambda exc, _tb: current() and on_error(exc))
        self._side_jobs.add(job)
        job.signals.finished.connect(lambda: self._side_jobs.discard(job))
        job.start()

    # --- export / validate ---------------------------------------------------------------------
    def export_dialog(self, quantize: str | None = None) -> None:
        if self.sources is None or self.model is None or self.busy:
            return
        outputs = self.model.checked_outputs()
        name = self.sources.model_path.stem.replace("eval_model", "model") + "_inference.onnx"
        dialog = ExportDialog(self, outputs, name, quantize=quantize if isinstance(quantize, str) else None,
                              settings=self.settings)
        dialog.accepted.connect(lambda: self.start_export(dialog.choices()))
        dialog.open()

    def start_export(self, choices) -> None:
        outputs = self.model.checked_outputs()
        self.log_line(f"exporting {', '.join(outputs)} to {choices.path}")
        self.run_job("export", jobs.export_job(self.sources, outputs, choices), self._exported)

    def _exported(self, result) -> None:
        export, post = result
        self.last_export = export.path
        self.log_line(f"wrote {export.path} ({export.size_bytes / 1e6:.2f} MB, {export.nodes} nodes, "
                      f"{export.folded} folded, {export.seconds:.2f} s)")
        for line in (post or {}).get("summary_lines", []):
            self.log_line(line)
        quantized = ((post or {}).get("quantize") or {}).get("path")
        self.last_quantized = Path(quantized) if quantized else None
        report = jobs.load_report(post) or jobs.export_only_report(export)
        self.result_panel.set_html(export_html(export, post))
        self.report_view.set_report(report)
        self.tabs.setCurrentWidget(self.report_tab)
        self._update_actions()
        self.exportFinished.emit(result)

    def validate_last(self) -> None:
        if self.last_export is None:
            self.export_dialog()
            return
        self.log_line(f"validating {self.last_export.name}")
        self.run_job("validate", jobs.validate_job(self.sources, self.last_export), self._validated)

    def _validated(self, report: dict) -> None:
        self.report_view.set_report(report)
        self.tabs.setCurrentWidget(self.report_tab)
        passed = report.get("passed")
        self.log_line("validation " + ("PASSED" if passed else "FAILED" if passed is False else "not run"))

    def requantize(self, nodes: list[str]) -> None:
        """The report's "keep these in float and quantize again"."""
        if self.last_quantized is None or self.last_export is None or not nodes:
            return
        self.log_line(f"quantizing {self.last_export.name} again, keeping {', '.join(nodes)} in float")
        self.run_job("requantize", jobs.requantize_job(self.last_quantized, self.last_export, nodes), self._validated)

    # --- PyTorch import --------------------------------------------------------------------------
    def import_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Hugging Face model folder (Cancel to pick a file)")
        if not path:
            path, _ = QFileDialog.getOpenFileName(self, "PyTorch program", "", "PyTorch (*.pt *.pt2)")
        if path:
            self.import_source(Path(path))

    def import_source(self, source: Path) -> None:
        """Ask before running a program's code (once per file), describe the source in the worker,
        then ask how to export it (gui/import_dialog.py)."""
        from .trust_prompt import trust_for_import

        trust = trust_for_import(self, source)
        if trust is None:
            self.log_line(f"not imported: {source.name} (its code was not trusted)")
            return
        self.run_job("describe", jobs.describe_job(source, trust), self._described)

    def _described(self, info) -> None:
        from .import_dialog import ImportDialog

        dialog = ImportDialog(info, self)
        dialog.accepted.connect(lambda: self.run_job("import", jobs.torch_import_job(dialog.options()),
                                                     self._imported))
        dialog.open()

    def _imported(self, result) -> None:
        for note in result.notes:
            self.log_line(note)
        self.log_line(f"imported: {', '.join(str(p) for p in result.open_paths)}")
        if result.open_paths:  # after this job has finished, so the window is free to open them
            QTimer.singleShot(0, lambda: self.open_paths(result.open_paths))

    # --- jobs ----------------------------------------------------------------------------------
    def _alive(self) -> bool:
        """False once Qt has deleted the window: a job may finish after its window is gone."""
        return shiboken6.isValid(self)

    @property
    def busy(self) -> bool:
        return self.job is not None

    def run_job(self, name: str, fn, on_result) -> Job | None:
        if self.busy:
            self.log_line(f"busy: {self.job.name} is running")
            return None
        job = self.job = Job(fn, name)
        job.signals.progress.connect(lambda fraction, message: self._alive() and self._progress(fraction, message))
        job.signals.returned.connect(lambda result: self._alive() and self._job_returned(job, on_result, result))
        job.signals.errored.connect(lambda exc, tb: self._alive() and self._job_failed(job, exc, tb))
        job.signals.cancelled.connect(lambda: self._alive() and self._job_cancelled(job))
        job.signals.finished.connect(lambda: self._alive() and self._job_finished(job))
        self.progress.setRange(0, 0)
        self.progress.setFormat("%p%")
        self.progress.setEnabled(True)
        self.cancel_button.setEnabled(True)
        self.status_text.setText(f"{name}…")
        self._update_actions()
        job.start()
        return job

    def cancel_job(self) -> None:
        if self.job is not None:
            self.job.cancel()
            if self.job.committed:
                self.status_text.setText(f"{self.job.name}: already written, finishing…")
            else:
                self.status_text.setText(f"cancelling {self.job.name}…")

    def _progress(self, fraction, message: str) -> None:
        if fraction is None:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * fraction))
        self.status_text.setText(message)

    def _job_returned(self, job: Job, on_result, result) -> None:
        if job.cancel_requested and job.committed:
            self.log_line(f"{job.name}: the cancel came after the result was written; it is kept")
        try:
            on_result(result)
        except Exception as exc:  # noqa: BLE001 - a result the window cannot use is an error dialog
            import traceback

            self._job_failed(job, exc, traceback.format_exc())
            return
        self.jobEnded.emit(job.name, "returned")

    def _job_failed(self, job: Job, exc: BaseException, details: str) -> None:
        text = error_text(exc)
        self.log_line(f"{job.name} failed: {text}")
        show_error(self, f"{job.name.capitalize()} failed", exc, details)
        self.errorShown.emit(text)
        self.jobEnded.emit(job.name, "errored")

    def _job_cancelled(self, job: Job) -> None:
        self.log_line(f"{job.name} cancelled; nothing was written")
        self.jobEnded.emit(job.name, "cancelled")

    def _job_finished(self, job: Job) -> None:
        if self.job is job:
            self.job = None
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setFormat("")
        self.progress.setEnabled(False)
        self.cancel_button.setEnabled(False)
        self.status_text.setText("ready")
        self._update_actions()

    def _update_actions(self) -> None:
        ready = self.sources is not None and not self.busy
        has_outputs = bool(self.model and self.model.checked_outputs())
        self.export_action.setEnabled(ready and has_outputs)
        self.quantize_action.setEnabled(ready and has_outputs)
        self.validate_action.setEnabled(ready)
        self.open_action.setEnabled(not self.busy)
        self.import_action.setEnabled(not self.busy)
        self.cancel_action.setEnabled(self.busy)

    def log_line(self, text: str) -> None:
        self.log.appendPlainText(f"{time.strftime('%H:%M:%S')}  {text}")

    # --- recent files and window state ---------------------------------------------------------
    def _recent(self) -> list[list[str]]:
        try:
            return json.loads(self.settings.value("recent", "[]"))
        except (TypeError, ValueError):
            return []

    def _remember_recent(self, paths: list[Path]) -> None:
        entry = [str(p.resolve()) for p in paths]
        recent = [entry] + [r for r in self._recent() if r != entry]
        self.settings.setValue("recent", json.dumps(recent[:MAX_RECENT]))
        self._fill_recent()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for entry in self._recent():
            act = self.recent_menu.addAction(" + ".join(Path(p).name for p in entry))
            act.setToolTip("\n".join(entry))
            act.triggered.connect(lambda _=False, e=entry: self.open_paths(e))
        self.recent_menu.setEnabled(bool(self._recent()))

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        if self.job is not None:
            self.job.cancel()
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        if hasattr(self.preview, "shutdown"):
            self.preview.shutdown()
        super().closeEvent(event)


def _make_preview() -> QWidget:
    """The Netron preview panel if it is there, else a placeholder saying so."""
    try:
        from .preview_panel import PreviewPanel
    except ImportError as exc:
        label = QLabel(f"The graph preview is not available ({exc}).", alignment=Qt.AlignCenter)
        label.setWordWrap(True)
        return label
    return PreviewPanel()
