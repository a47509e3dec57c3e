"""The export dialog: where to write, external data, quantization, validate afterwards.

It only gathers choices (`ExportChoices`); the main window runs the export in the worker. The
destination starts beside the source model (`<model dir>/<stem>_inference.onnx`); the folder
last exported to is remembered in QSettings (the start for callers with no model). An existing
destination asks before overwriting (the file is only replaced once the new one is complete).
Below the choices, "Writes" names every
file the export will write (the float32 model, the quantized one beside it, the report), following
the destination and the choices as they change (core/workflow/written_names.py gives the names).
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

from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.workflow.written_names import quantized_path, report_path_for

from ..widgets import plain_text
from ..widgets.plain_text import plain_label

EXTERNAL = [("Automatic (above 2 GB)", "auto"), ("Always (.onnx + .onnx.data)", "always"),
            ("Never (one file)", "never")]
QUANTIZE = [("None (float32)", None), ("Dynamic int8", "dynamic"), ("Static int8 (QDQ, calibrated)", "static"),
            ("Float16", "fp16"), ("Int4 (weight-only, large MatMul weights)", "int4")]
MODE_NAMES = {"dynamic": "dynamic int8", "static": "static int8", "fp16": "float16", "int4": "int4"}


def written_files_text(path: Path, quantize: str | None, validate: bool) -> str:
    """'Writes: x.onnx (float32), x.int8.onnx (dynamic int8) and x.report.json (report)'."""
    if not path.name:
        return "Writes: (choose a destination)"
    files = [f"<b>{path.name}</b> (float32)"]
    if quantize:
        files.append(f"<b>{quantized_path(path, quantize).name}</b> ({MODE_NAMES.get(quantize, quantize)})")
    if quantize or validate:
        files.append(f"<b>{report_path_for(path).name}</b> (report)")
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


class ExportDialog(QDialog):
    def __init__(self, parent, outputs: list[str], suggested_name: str, quantize: str | None = None,
                 settings: QSettings | None = None, folder: Path | None = None) -> None:
        """`folder`: where the destination starts (the source model's folder); else the last one used."""
        super().__init__(parent)
        self.setWindowTitle("Export inference model")
        self.settings = settings or QSettings()
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
            self.quantize.setCurrentIndex([v for _, v in QUANTIZE].index(quantize))
        self.validate = QCheckBox("Validate against the eval graph + checkpoint afterwards")
        self.validate.setChecked(True)
        form = QFormLayout()
        form.addRow("Destination", row)
        form.addRow("External data", self.external)
        form.addRow("Quantization", self.quantize)
        form.addRow("", self.validate)
        outputs_label = plain_label("Outputs kept: " + ", ".join(outputs))
        outputs_label.setWordWrap(True)
        self.written = plain_label()
        self.written.setWordWrap(True)
        self.written.setTextInteractionFlags(Qt.TextSelectableByMouse)
        form.addRow("", self.written)
        self.path_edit.textChanged.connect(self._show_written)
        self.quantize.currentIndexChanged.connect(self._show_written)
        self.validate.toggled.connect(self._show_written)
        self._show_written()
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Export")
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(outputs_label)
        layout.addLayout(form)
        layout.addWidget(buttons)
        self.resize(620, self.sizeHint().height())

    def choices(self) -> ExportChoices:
        return ExportChoices(Path(self.path_edit.text()).expanduser(), self.external.currentData(),
                             self.quantize.currentData(), self.validate.isChecked())

    def _show_written(self) -> None:
        choices = self.choices()
        self.written.setText(written_files_text(choices.path, choices.quantize, choices.validate))

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export to", self.path_edit.text(), "ONNX model (*.onnx)")
        if path:
            self.path_edit.setText(path if path.endswith(".onnx") else path + ".onnx")

    def _accept(self) -> None:
        path = self.choices().path
        if not path.name:
            return
        if path.exists():
            answer = plain_text.ask(self, "Replace?", f"{path.name} exists. Replace it once the export "
                                    "is complete?")
            if answer != QMessageBox.Yes:
                return
        self.settings.setValue("export/folder", str(path.parent))
        self.accept()
