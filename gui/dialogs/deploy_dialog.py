"""The Deploy dialog: which runtime the model will run in, in words, and where to write it.

It only gathers choices (`DeployChoices`); the deploy flow (deploy_flow.py) runs the core's deploy
in the worker. The target list is the core's (ORT Mobile, then each ONNX Runtime release, newest
first); below it, what that target needs, as the core says it (`Target.needs`), as plain text.
Shapes and dims are written as on the command line (`x=1x3x224x224`, `batch=1`, `batch=dynamic`)
and checked before the dialog closes; the destination's suffix follows the target (.ort/.onnx)
and "Writes" names every file the deploy will write. The destination's name follows the model (typed
or chosen) until the user names it. An existing file asks before it is replaced.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
)

from onnxport.core.deploy.mobile import CONFIG_SUFFIX
from onnxport.core.deploy.shapes import parse_shape_options
from onnxport.core.deploy.targets import MOBILE, deployed_name, known_targets, parse_target
from onnxport.core.util.errors import OnnxportError

from ..jobs.deploy_call import DeployChoices
from ..widgets import plain_text


def target_label(name: str) -> str:
    return "ORT Mobile (.ort + operator config for a reduced build)" if name == MOBILE else \
        f"ONNX Runtime {name[4:]} (.onnx)"


def target_names() -> list[tuple[str, str]]:
    """(name, label) of every target: ORT Mobile, then each ONNX Runtime release, newest first."""
    names = known_targets()
    ordered = [MOBILE] + sorted(names[1:], key=lambda n: tuple(map(int, n[4:].split("."))), reverse=True)
    return [(name, target_label(name)) for name in ordered]


def _plain_label(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.PlainText)  # file and input names are shown as they are, never as markup
    label.setWordWrap(True)
    return label


class DeployDialog(QDialog):
    def __init__(self, parent, model: Path | None = None, settings: QSettings | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Deploy to a runtime")
        self.settings = settings or QSettings()
        self.model_edit = QLineEdit(str(model) if model else "")
        self.target = QComboBox()
        for name, label in target_names():
            self.target.addItem(label, name)
        self.needs = _plain_label()
        self.shapes = QLineEdit()
        self.shapes.setPlaceholderText("fixed input shapes, e.g. x=1x3x224x224 (space between inputs)")
        self.dims = QLineEdit()
        self.dims.setPlaceholderText("e.g. batch=1 to fix it, batch=dynamic to free it, x:2=48 for an unnamed axis")
        folder = self.settings.value("deploy/folder", str(model.parent) if model else str(Path.home()))
        self._stem, self._folder = (model.stem if model else "model"), Path(folder)
        self.out_edit = QLineEdit(str(self._folder / deployed_name(self._stem, MOBILE)))
        self._named = False  # the user typed or chose a destination: the target no longer renames it
        self.out_edit.textEdited.connect(lambda _text: setattr(self, "_named", True))
        self.written = _plain_label()
        self.problem = _plain_label()
        self.problem.setStyleSheet("color: #b00020")
        form = QFormLayout()
        form.addRow("Model", self._with_browse(self.model_edit, self._browse_model))
        form.addRow("Target", self.target)
        form.addRow("", self.needs)
        form.addRow("Shapes", self.shapes)
        form.addRow("Dimensions", self.dims)
        form.addRow("Destination", self._with_browse(self.out_edit, self._browse_out))
        form.addRow("", self.written)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Deploy")
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self.target.currentIndexChanged.connect(self._target_changed)
        self.model_edit.textChanged.connect(self._model_changed)
        self.out_edit.textChanged.connect(self._show_written)
        self._target_changed()
        self.resize(680, self.sizeHint().height())

    @staticmethod
    def _with_browse(edit: QLineEdit, slot) -> QHBoxLayout:
        browse = QPushButton("Browse…")
        browse.clicked.connect(slot)
        row = QHBoxLayout()
        row.addWidget(edit, 1)
        row.addWidget(browse)
        return row

    def choices(self) -> DeployChoices:
        return DeployChoices(Path(self.model_edit.text()).expanduser(), self.target.currentData(),
                             Path(self.out_edit.text()).expanduser(), self.shapes.text().split(),
                             self.dims.text().split())

    def _target_changed(self) -> None:
        target = parse_target(self.target.currentData())
        self.needs.setText(target.needs())
        out = Path(self.out_edit.text())
        if not self._named:
            self.out_edit.setText(str((out.parent if out.name else self._folder)
                                      / deployed_name(self._stem, self.target.currentData())))
        elif out.name and out.suffix.lower() != target.suffix:
            self.out_edit.setText(str(out.with_suffix(target.suffix)))
        self._show_written()

    def _model_changed(self, text: str) -> None:
        """Another model typed or chosen: the destination takes its name (the int8 model is never
        written under the float model's), unless the user named the destination."""
        model = Path(text).expanduser()
        if model.name:
            self._stem = model.stem
            self._target_changed()

    def _show_written(self) -> None:
        out = self.choices().out
        if not out.name:
            self.written.setText("Writes: (choose a destination)")
        elif self.target.currentData() == MOBILE:
            self.written.setText(f"Writes: {out.name} and {out.stem + CONFIG_SUFFIX}, once checked against the model")
        else:
            self.written.setText(f"Writes: {out.name}, once checked against the model")

    def _browse_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Model to deploy", self.model_edit.text(), "ONNX model (*.onnx)")
        if path:
            self.model_edit.setText(path)

    def _browse_out(self) -> None:
        suffix = parse_target(self.target.currentData()).suffix
        path, _ = QFileDialog.getSaveFileName(self, "Deploy to", self.out_edit.text(), f"Model (*{suffix})")
        if path:
            self._named = True
            self.out_edit.setText(path if path.endswith(suffix) else path + suffix)

    def _accept(self) -> None:
        choices = self.choices()
        try:
            if not choices.model.is_file():
                raise OnnxportError(f"{choices.model}: no such model file")
            parse_shape_options(choices.shapes, choices.dims)
        except OnnxportError as exc:
            self.problem.setText(exc.one_line())
            return
        if not choices.out.name:
            return
        if choices.out.exists():
            answer = plain_text.ask(self, "Replace?", f"{choices.out.name} exists. Replace it once the new "
                                    "one is written and checked?")  # a file name: plain text
            if answer != QMessageBox.Yes:
                return
        self.settings.setValue("deploy/folder", str(choices.out.parent))
        self.accept()
