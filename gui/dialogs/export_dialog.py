"""The export dialog: where to write, external data, quantization and its choices, validation.

It only gathers choices (`ExportChoices`); the main window runs the export in the worker. The
destination starts beside the source model (`<model dir>/<stem>_inference.onnx`); the folder
last exported to is remembered in QSettings (the start for callers with no model), and the window
hands back the choices of this model's last export (`remembered`), failed or not. An existing
destination asks before overwriting (the file is only replaced once the new one is complete).
The quantization's own choices (quantize_box.py) follow the mode; `mode_notes` says, under the
mode, why a mode cannot help this model (core/quantize/mode_choice.py). "Input shapes" and
"Dimensions" (`x=1x3x224x224`, `batch=1`) size the inputs validation and quantization generate, and
with "Deploy to" a runtime they are fixed in the deployed model (`batch=dynamic` frees the batch),
checked by running it: the CLI's `export --target T --shape --dim`. "Rename" is `--rename OLD=NEW`.
Below the choices, "Writes" names every file the export will write, as plain text (the names are
the user's), following the destination and the choices (core/workflow/companion_names.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
)

from onnxport.core.deploy.shapes import parse_shape_options
from onnxport.core.deploy.targets import deployed_name
from onnxport.core.graph.rename_ends import parse_renames
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.util.errors import OnnxportError
from onnxport.core.workflow.companion_names import quantized_path, report_path_for

from ..widgets import plain_text
from ..widgets.plain_text import plain_label
from .deploy_dialog import target_names
from .error_dialog import error_text, show_error
from .quantize_box import QuantizeBox

EXTERNAL = [("Automatic (above 2 GB)", "auto"), ("Always (.onnx + .onnx.data)", "always"),
            ("Never (one file)", "never")]
QUANTIZE = [("None (float32)", None), ("Dynamic int8", "dynamic"), ("Static int8 (QDQ, calibrated)", "static"),
            ("Float16", "fp16"), ("Int4 (weight-only, large MatMul weights)", "int4")]
MODE_NAMES = {"dynamic": "dynamic int8", "static": "static int8", "fp16": "float16", "int4": "int4"}
NOTE_COLOUR = "color: #9a5b00"
PROBLEM_COLOUR = "color: #b00020"


def written_files_text(path: Path, quantize: str | None, validate: bool, target: str | None = None) -> str:
    """'Writes: x.onnx (float32), x.int8.onnx (dynamic int8) and x.report.json (report)'; with a
    deploy `target`, the deployed model too (beside the final model, as `export --target`)."""
    if not path.name:
        return "Writes: (choose a destination)"
    files = [f"{path.name} (float32)"]
    if quantize:
        files.append(f"{quantized_path(path, quantize).name} ({MODE_NAMES.get(quantize, quantize)})")
    if quantize or validate:
        files.append(f"{report_path_for(path).name} (report)")
    if target:
        final = quantized_path(path, quantize) if quantize else path
        files.append(f"{deployed_name(final.stem, target)} (deployed)")
    listed = files[0] if len(files) == 1 else ", ".join(files[:-1]) + " and " + files[-1]
    return f"Writes: {listed}"


@dataclass
class ExportChoices:
    path: Path
    external_data: str = "auto"
    quantize: str | None = None
    validate: bool = True
    quantize_options: QuantizeOptions | None = None  # None: the quantizer's defaults
    dim_sizes: dict[str, int] = field(default_factory=dict)  # sizes of generated inputs (as --dim)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # (as --shape)
    renames: dict[str, str] = field(default_factory=dict)  # new names of inputs and outputs (as --rename)
    target: str | None = None  # then deployed for this runtime, the sizes below fixed in it (as --target)
    deploy_shapes: list[str] = field(default_factory=list)  # "x=1x3x224x224", as deploy's --shape
    deploy_dims: list[str] = field(default_factory=list)  # "batch=1", "batch=dynamic", as deploy's --dim


def input_sizes(shapes_text: str, dims_text: str,
                deploying: bool = False) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """'x=1x3x224x224', 'batch=1 sequence=128' -> (shapes, dim sizes), as the CLI's --shape/--dim.
    `deploying`: `NAME=dynamic` is the deploy's alone (frees that dim in the deployed model)."""
    request = parse_shape_options(shapes_text.split(), dims_text.split())
    freed = [name for name, size in request.dims.items() if not isinstance(size, int)]
    if freed and not deploying:
        raise OnnxportError(f"dimensions: '{freed[0]}=dynamic' frees a dimension of the deployed model; choose "
                            "a runtime in \"Deploy to\", or give a size (e.g. batch=1)")
    return dict(request.shapes), {k: v for k, v in request.dims.items() if isinstance(v, int)}


def say_after_export_failure(parent, exc: Exception, details: str, written: tuple, last: tuple | None) -> str:
    """A step after the export failed, the float model written: the error box says what failed and
    what stays written (e.g. "Dynamic int8 quantization failed" ... "The float32 model /x/m.onnx is
    written and validated."); returns the log's line. `last`: (model, ExportChoices) of the run."""
    export, post = written
    mode = getattr(last[1], "quantize", None) if last else None
    step = f"{MODE_NAMES.get(mode, mode)} quantization" if mode else "the report"
    checked = " and validated" if post is not None and post.validation is not None else ""
    kept = f"the float32 model {export.path} is written{checked}"
    box = show_error(parent, f"{step[0].upper()}{step[1:]} failed", exc, details)
    box.setText(f"{box.text()}\n\n{kept[0].upper()}{kept[1:]}.")
    return f"{step} failed: {error_text(exc)}; {kept}"


def export_dialog_for(parent, session, outputs: list[str], quantize: str | None, settings: QSettings,
                      remembered: ExportChoices | None) -> ExportDialog:
    """The Export dialog for `session`'s `outputs`: the destination beside the model, validation
    against what the session holds, `quantize` "int8" for the int8 mode that can help it
    (core/quantize/mode_choice.py: its reason under Dynamic when that cannot)."""
    from onnxport.core.quantize.mode_choice import int8_choice

    mode, why = int8_choice(session.table.ops)
    reference = ("the eval graph + checkpoint" if session.params is not None
                 else f"the source model ({session.model_path.name})")
    name = session.model_path.stem.replace("eval_model", "model") + "_inference.onnx"
    start = mode if quantize == "int8" else quantize if isinstance(quantize, str) else None
    return ExportDialog(parent, outputs, name, quantize=start, settings=settings, folder=session.model_path.parent,
                        reference=reference, mode_notes={"dynamic": why} if why else None, remembered=remembered)


def _rename_edit() -> QLineEdit:
    edit = QLineEdit(placeholderText="e.g. input=pixels logits=scores (inputs and outputs)")
    edit.setToolTip("New names for the exported model's inputs and outputs (as the CLI's --rename)")
    return edit


def _target_box() -> QComboBox:
    """"Deploy to": none, or a runtime (deploy_dialog.py's list)."""
    box = QComboBox()
    box.addItem("No (the exported model only)", None)
    for name, label in target_names():
        box.addItem(label, name)
    box.setToolTip("Deploy the result for this runtime, the input shapes and dimensions fixed in it and checked by "
                   "running it (as the CLI's export --target)")
    return box


class ExportDialog(QDialog):
    def __init__(self, parent, outputs: list[str], suggested_name: str, quantize: str | None = None,
                 settings: QSettings | None = None, folder: Path | None = None, *,
                 reference: str = "the eval graph + checkpoint", mode_notes: dict[str, str] | None = None,
                 remembered: ExportChoices | None = None) -> None:
        """`folder`: where the destination starts (the source model's folder); else the last one used.
        `reference`: what validation compares with; `remembered`: the choices to show again."""
        super().__init__(parent)
        self.setWindowTitle("Export inference model")
        self.settings = settings or QSettings()
        self.mode_notes = dict(mode_notes or {})
        folder = folder if folder is not None else self.settings.value("export/folder", str(Path.home()))
        self.path_edit = QLineEdit(str(Path(folder) / suggested_name))
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row = QHBoxLayout()
        row.addWidget(self.path_edit, 1)
        row.addWidget(browse)
        self.external = QComboBox()
        for label, value in EXTERNAL:
            self.external.addItem(label, value)
        self.quantize = QComboBox()
        for label, value in QUANTIZE:
            self.quantize.addItem(label, value)
        if quantize:
            self.quantize.setCurrentIndex(self.quantize.findData(quantize))
        self.mode_note = plain_label()
        self.mode_note.setWordWrap(True)
        self.mode_note.setStyleSheet(NOTE_COLOUR)
        self.options_box = QuantizeBox()
        self.validate = QCheckBox(f"Validate against {reference}")
        self.validate.setChecked(True)
        self.shapes = QLineEdit(placeholderText="e.g. x=1x3x224x224 (space between inputs)")
        self.dims = QLineEdit(placeholderText="e.g. batch=1 sequence=128, batch=dynamic, x:2=48 for an unnamed axis")
        self.renames, self.target = _rename_edit(), _target_box()
        form = QFormLayout()
        form.addRow("Destination", row)
        form.addRow("External data", self.external)
        form.addRow("Quantization", self.quantize)
        form.addRow("", self.mode_note)
        form.addRow("", self.options_box)
        form.addRow("", self.validate)
        form.addRow("Rename", self.renames)
        form.addRow("Deploy to", self.target)
        for label, edit in (("Input shapes", self.shapes), ("Dimensions", self.dims)):
            edit.setToolTip("Sizes of the generated inputs validation and quantization run on; with \"Deploy to\", "
                            "fixed in the deployed model (batch=dynamic frees the batch): the CLI's --shape and --dim")
            form.addRow(label, edit)
        outputs_label = plain_label("Outputs kept: " + ", ".join(outputs))
        outputs_label.setWordWrap(True)
        self.written = plain_label()
        self.written.setWordWrap(True)
        self.written.setTextInteractionFlags(Qt.TextSelectableByMouse)
        form.addRow("", self.written)
        self.problem = plain_label()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet(PROBLEM_COLOUR)
        if remembered is not None:
            self.show_choices(remembered)
        self.path_edit.textChanged.connect(self._show_written)
        self.quantize.currentIndexChanged.connect(self._mode_changed)
        self.validate.toggled.connect(self._show_written)
        self.target.currentIndexChanged.connect(self._show_written)
        self.renames.textChanged.connect(self._renamed)
        self._mode_changed()
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Export")
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(outputs_label)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self.resize(680, self.sizeHint().height())

    def choices(self) -> ExportChoices:
        """The choices as shown; raises `OnnxportError` naming an entry that cannot be read."""
        quantize, target = self.quantize.currentData(), self.target.currentData()
        shapes, dims = input_sizes(self.shapes.text(), self.dims.text(), deploying=target is not None)
        renames = parse_renames(self.renames.text().split())
        return ExportChoices(Path(self.path_edit.text()).expanduser(), self.external.currentData(), quantize,
                             self.validate.isChecked() and self.validate.isEnabled(), self.options_box.options() if quantize else None, dims, shapes,
                             renames, target, self.shapes.text().split() if target else [],
                             self.dims.text().split() if target else [])

    def show_choices(self, choices: ExportChoices) -> None:
        """Show `choices` again (the last export of this model, failed or not)."""
        self.path_edit.setText(str(choices.path))
        self.external.setCurrentIndex(max(self.external.findData(choices.external_data), 0))
        self.quantize.setCurrentIndex(max(self.quantize.findData(choices.quantize), 0) if choices.quantize else 0)
        self.validate.setChecked(choices.validate)
        if choices.quantize_options is not None:
            self.options_box.set_options(choices.quantize_options)
        self.shapes.setText(" ".join(f"{k}={'x'.join(map(str, v))}" for k, v in choices.shapes.items()))
        self.dims.setText(" ".join(f"{k}={v}" for k, v in choices.dim_sizes.items()))
        if choices.target:
            self.shapes.setText(" ".join(choices.deploy_shapes))
            self.dims.setText(" ".join(choices.deploy_dims))
        self.target.setCurrentIndex(max(self.target.findData(choices.target), 0) if choices.target else 0)
        self.renames.setText(" ".join(f"{k}={v}" for k, v in choices.renames.items()))

    def _renamed(self, text: str) -> None:
        """Renamed ends are not validated (the reference has the old names): the box says so."""
        self.validate.setEnabled(not text.strip())
        self.validate.setToolTip("" if not text.strip() else "Not with renamed inputs or outputs: the reference "
                                 "has the old names")

    def _mode_changed(self) -> None:
        mode = self.quantize.currentData()
        self.options_box.set_mode(mode)
        note = self.mode_notes.get(mode or "", "")
        self.mode_note.setText(note)
        self.mode_note.setVisible(bool(note))
        self._show_written()

    def _show_written(self) -> None:
        path = Path(self.path_edit.text()).expanduser()
        self.written.setText(written_files_text(path, self.quantize.currentData(), self.validate.isChecked(),
                                                self.target.currentData()))

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export to", self.path_edit.text(), "ONNX model (*.onnx)")
        if path:
            self.path_edit.setText(path if path.endswith(".onnx") else path + ".onnx")

    def _accept(self) -> None:
        try:
            path = self.choices().path
        except OnnxportError as exc:
            self.problem.setText(exc.one_line())
            return
        self.problem.clear()
        if not path.name:
            return
        if path.exists():
            answer = plain_text.ask(self, "Replace?", f"{path.name} exists. Replace it once the export "
                                    "is complete?")
            if answer != QMessageBox.Yes:
                return
        self.settings.setValue("export/folder", str(path.parent))
        self.accept()
