"""The PyTorch import dialog: source, mode, task preset, opset, inputs, trainable/frozen parameters.

`ImportDialog(info, parent)` shows a described source (`core.torch_sources.SourceInfo`, computed
off the GUI thread by the caller) and, once accepted, `options()` returns the
`core.torch_import.TorchImportOptions` a worker hands to `run_import`. The dialog runs no torch
itself; for Hugging Face folders, `describe` (default: `describe_source`) re-lists the parameters
when the task changes (their names depend on the model class the task loads).

Parameters form a tree by module path with tri-state checkboxes: checked = trainable, unchecked =
frozen. Float buffers (BatchNorm running statistics) are always frozen and cannot be checked;
non-float buffers are not parameters and are not shown.

A TorchScript or `.pt2` source is a program: the dialog's `trust_code` (by default what the user
answered gui/dialogs/trust_prompt.py's question for the file) goes into `TorchImportOptions.trust_code`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from onnxport.core.pytorch.export import DEFAULT_OPSET, OPSET_RANGE
from onnxport.core.pytorch.presets import POOLING_MODES, get_preset
from onnxport.core.pytorch.sources import DTYPES, InputSpec, SourceInfo, describe_source, parse_input_spec
from onnxport.core.training.artifacts import LOSSES, OPTIMIZERS
from onnxport.core.training.environment import HOW_TO_GET, find_training_python
from onnxport.core.util.errors import OnnxportError
from onnxport.core.workflow.torch_import import TorchImportOptions

from ..widgets.plain_text import plain_label, plain_tip
from .trust_prompt import SESSION_TRUST

NAME_ROLE = Qt.ItemDataRole.UserRole + 1


class ImportDialog(QDialog):
    def __init__(self, info: SourceInfo, parent: QWidget | None = None, *, out_path: Path | None = None,
                 describe: Callable[[Path, str | None], SourceInfo] | None = None,
                 trust_code: bool | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Import {info.path.name}")
        self._info = info
        # None: as the user answered `trust_for_import` for this file in this session
        self.trust_code = info.path in SESSION_TRUST if trust_code is None else trust_code
        self._describe = describe or (lambda path, task: describe_source(path, task, trust_code=self.trust_code))
        self._opset_touched = False
        layout = QVBoxLayout(self)
        title = plain_label(f"{info.path} ({info.kind.value})")  # file names: text, never markup
        bold = title.font()
        bold.setBold(True)
        title.setFont(bold)
        layout.addWidget(title)
        self.notes = plain_label("\n".join(info.notes))
        self.notes.setWordWrap(True)
        layout.addWidget(self.notes)
        layout.addLayout(self._build_top())
        layout.addWidget(self._build_inputs())
        layout.addWidget(self._build_training())
        out_row = QHBoxLayout()
        default_out = out_path or info.path.with_name(info.path.stem + ".onnx")
        self.out_edit = QLineEdit(str(default_out))
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        out_row.addWidget(QLabel("Write to:"))
        out_row.addWidget(self.out_edit, 1)
        out_row.addWidget(browse)
        layout.addLayout(out_row)
        self.error = plain_label()
        self.error.setStyleSheet("color: #b00020")
        self.error.setWordWrap(True)
        layout.addWidget(self.error)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self._fill_parameters(info)
        self._mode_changed()

    # ---- building -------------------------------------------------------------------------
    def _build_top(self) -> QFormLayout:
        form = QFormLayout()
        modes = QHBoxLayout()
        self.inference_radio = QRadioButton("Inference (deployable model)")
        self.training_radio = QRadioButton("Training (forward graph for on-device training)")
        self.inference_radio.setChecked(True)
        for radio in (self.inference_radio, self.training_radio):
            radio.toggled.connect(self._mode_changed)
            modes.addWidget(radio)
        form.addRow("Mode:", modes)
        self.task_combo = QComboBox()
        self.task_combo.addItems(list(self._info.tasks) or ["(the model's own outputs)"])
        if self._info.task:
            self.task_combo.setCurrentText(self._info.task)
        self.task_combo.setEnabled(self._info.is_hf)
        self.task_combo.currentTextChanged.connect(self._task_changed)
        form.addRow("Task preset:", self.task_combo)
        self.pooling_combo = QComboBox()
        self.pooling_combo.addItems(list(POOLING_MODES))
        form.addRow("Pooling:", self.pooling_combo)
        self.opset_spin = QSpinBox()
        self.opset_spin.valueChanged.connect(self._opset_edited)
        form.addRow("Opset:", self.opset_spin)
        self.outputs_edit = QLineEdit(", ".join(self._info.outputs))
        form.addRow("Output names:", self.outputs_edit)
        self.quantize_check = QCheckBox("Also write a dynamic int8 model")
        self.quantize_check.setToolTip("quantized to an accuracy target (cosine >= 0.99 per output against the "
                                       "float32 model), as Quantize does; its validation goes to the log")
        form.addRow("", self.quantize_check)
        return form

    def _build_inputs(self) -> QGroupBox:
        box = QGroupBox("Inputs (a name in a shape is a dynamic dimension, e.g. batch, sequence)")
        v = QVBoxLayout(box)
        if not self._info.inputs_known:
            warn = QLabel("This source does not record its inputs' dtypes and shapes: fill them in.")
            warn.setStyleSheet("color: #8a5a00")
            v.addWidget(warn)
        self.inputs_table = QTableWidget(0, 3)
        self.inputs_table.setHorizontalHeaderLabels(["Name", "DType", "Shape"])
        self.inputs_table.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        for spec in self._info.inputs:
            self.add_input_row(spec)
        v.addWidget(self.inputs_table)
        row = QHBoxLayout()
        add, remove = QPushButton("Add input"), QPushButton("Remove input")
        add.clicked.connect(lambda: self.add_input_row(InputSpec(f"input_{self.inputs_table.rowCount()}")))
        remove.clicked.connect(lambda: self.inputs_table.removeRow(max(self.inputs_table.currentRow(),
                                                                       self.inputs_table.rowCount() - 1)))
        row.addWidget(add)
        row.addWidget(remove)
        row.addStretch(1)
        v.addLayout(row)
        return box

    def add_input_row(self, spec: InputSpec) -> None:
        r = self.inputs_table.rowCount()
        self.inputs_table.insertRow(r)
        self.inputs_table.setItem(r, 0, QTableWidgetItem(spec.name))
        combo = QComboBox()
        combo.addItems(list(DTYPES))
        combo.setCurrentText(spec.dtype)
        self.inputs_table.setCellWidget(r, 1, combo)
        self.inputs_table.setItem(r, 2, QTableWidgetItem(", ".join(str(d) for d in spec.shape)))

    def _build_training(self) -> QGroupBox:
        self.training_box = QGroupBox("Training")
        v = QVBoxLayout(self.training_box)
        row = QHBoxLayout()
        self.artifacts_check = QCheckBox("Generate training artifacts into:")
        self.artifacts_edit = QLineEdit(str(self._info.path.with_name(self._info.path.stem + "_artifacts")))
        # ORT's training API runs in a separate training environment: without one, say so here.
        available = find_training_python() is not None
        self.artifacts_check.setChecked(available)
        self.artifacts_check.setEnabled(available)
        self.artifacts_edit.setEnabled(available)
        if not available:
            why = f"Needs the training environment (onnxruntime-training 1.19.2): {HOW_TO_GET}"
            self.artifacts_check.setToolTip(plain_tip(why))
            self.artifacts_edit.setToolTip(plain_tip(why))
        row.addWidget(self.artifacts_check)
        row.addWidget(self.artifacts_edit, 1)
        v.addLayout(row)
        form = QFormLayout()
        self.loss_combo = QComboBox()
        self.loss_combo.addItems(list(LOSSES))
        self.optimizer_combo = QComboBox()
        self.optimizer_combo.addItems(list(OPTIMIZERS))
        form.addRow("Loss:", self.loss_combo)
        form.addRow("Optimizer:", self.optimizer_combo)
        v.addLayout(form)
        v.addWidget(QLabel("Parameters: checked = trainable, unchecked = frozen"))
        self.param_model = QStandardItemModel(0, 3, self)
        self.param_model.setHorizontalHeaderLabels(["Parameter", "Shape", "DType"])
        self._syncing = False
        self.param_model.itemChanged.connect(self._item_changed)
        self.param_view = QTreeView()
        self.param_view.setModel(self.param_model)
        self.param_view.setUniformRowHeights(True)
        v.addWidget(self.param_view)
        return self.training_box

    def _fill_parameters(self, info: SourceInfo) -> None:
        self.param_model.removeRows(0, self.param_model.rowCount())
        groups: dict[str, QStandardItem] = {}
        root = self.param_model.invisibleRootItem()
        for p in info.parameters:
            if not (p.trainable_default or p.frozen_default):
                continue  # integer buffers are not parameters
            parent = root
            parts = p.name.split(".")
            for depth in range(1, len(parts)):
                key = ".".join(parts[:depth])
                if key not in groups:
                    item = QStandardItem(parts[depth - 1])
                    item.setCheckable(True)
                    item.setEditable(False)
                    parent.appendRow([item, _cell(""), _cell("")])
                    groups[key] = item
                parent = groups[key]
            leaf = QStandardItem(parts[-1])
            leaf.setData(p.name, NAME_ROLE)
            leaf.setEditable(False)
            leaf.setCheckable(True)
            leaf.setCheckState(Qt.CheckState.Checked if p.trainable_default else Qt.CheckState.Unchecked)
            if p.frozen_default:
                leaf.setEnabled(False)
                leaf.setToolTip("running statistics have no gradient: always frozen")
            parent.appendRow([leaf, _cell("×".join(str(d) for d in p.shape) or "scalar"), _cell(p.dtype)])
        self._syncing = True
        for r in range(root.rowCount()):
            _derive_state(root.child(r, 0))
        self._syncing = False
        self.param_view.expandToDepth(0)
        self.param_view.resizeColumnToContents(0)

    def _item_changed(self, item: QStandardItem) -> None:
        """Ticking a module ticks its parameters; parents show all / none / some of theirs."""
        if self._syncing or item.column() != 0 or not item.isCheckable():
            return
        self._syncing = True
        try:
            if item.data(NAME_ROLE) is None and item.checkState() != Qt.CheckState.PartiallyChecked:
                _set_subtree(item, item.checkState())
            parent = item.parent()
            while parent is not None:
                _derive_state(parent, recurse=False)
                parent = parent.parent()
        finally:
            self._syncing = False

    # ---- reacting ---------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return "training" if self.training_radio.isChecked() else "inference"

    def _mode_changed(self) -> None:
        training = self.mode == "training"
        low, high = OPSET_RANGE[self.mode]
        self.opset_spin.blockSignals(True)
        self.opset_spin.setRange(low, high)
        if not self._opset_touched:
            self.opset_spin.setValue(DEFAULT_OPSET[self.mode])
        self.opset_spin.blockSignals(False)
        self.training_box.setEnabled(training)
        self.quantize_check.setEnabled(not training)
        if training:
            self.quantize_check.setChecked(False)
        self.pooling_combo.setEnabled(self._info.is_hf and self.task_combo.currentText() == "pooling")

    def _opset_edited(self) -> None:
        self._opset_touched = True

    def _task_changed(self, task: str) -> None:
        if not self._info.is_hf:
            return
        self.outputs_edit.setText(", ".join(get_preset(task).outputs))
        self.pooling_combo.setEnabled(task == "pooling")
        try:
            info = self._describe(self._info.path, task)
        except OnnxportError as exc:
            self.error.setText(exc.one_line())
            return
        self._fill_parameters(info)

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Write ONNX model", self.out_edit.text(), "ONNX (*.onnx)")
        if path:
            self.out_edit.setText(path)

    # ---- results ----------------------------------------------------------------------------
    def input_specs(self) -> list[InputSpec]:
        """The input form as specs; OnnxportError naming the bad row."""
        specs = []
        highs = {s.name: s.high for s in self._info.inputs}
        for r in range(self.inputs_table.rowCount()):
            name = (self.inputs_table.item(r, 0).text() if self.inputs_table.item(r, 0) else "").strip()
            dtype = self.inputs_table.cellWidget(r, 1).currentText()
            shape = (self.inputs_table.item(r, 2).text() if self.inputs_table.item(r, 2) else "").replace(" ", "")
            spec = parse_input_spec(f"{name}:{dtype}:{shape}")
            spec.high = highs.get(spec.name)  # integer inputs keep the source's value range (vocab size)
            specs.append(spec)
        if not specs:
            raise OnnxportError("the model needs at least one input")
        return specs

    def parameter_choice(self) -> tuple[list[str], list[str]]:
        """(trainable, frozen) parameter names as ticked in the tree, in the source's order."""
        trainable: list[str] = []
        frozen: list[str] = []

        def walk(item: QStandardItem) -> None:
            for r in range(item.rowCount()):
                child = item.child(r, 0)
                name = child.data(NAME_ROLE)
                if name is None:
                    walk(child)
                elif child.checkState() == Qt.CheckState.Checked and child.isEnabled():
                    trainable.append(name)
                else:
                    frozen.append(name)

        walk(self.param_model.invisibleRootItem())
        return trainable, frozen

    def options(self) -> TorchImportOptions:
        training = self.mode == "training"
        trainable, frozen = self.parameter_choice() if training else (None, None)
        task = self.task_combo.currentText() if self._info.is_hf else None
        outputs = [n.strip() for n in self.outputs_edit.text().split(",") if n.strip()] or None
        return TorchImportOptions(
            source=self._info.path, out_path=Path(self.out_edit.text().strip()), mode=self.mode, task=task,
            opset=self.opset_spin.value(), inputs=self.input_specs(), output_names=outputs,
            pooling=self.pooling_combo.currentText(), quantize=self.quantize_check.isChecked() and not training,
            artifacts_dir=Path(self.artifacts_edit.text().strip())
            if training and self.artifacts_check.isChecked() else None,
            trainable=trainable, frozen=frozen, loss=self.loss_combo.currentText(),
            optimizer=self.optimizer_combo.currentText(), trust_code=self.trust_code)

    def accept(self) -> None:
        try:
            options = self.options()
            if not options.out_path.name.endswith(".onnx"):
                raise OnnxportError("the output file name should end in .onnx")
            if options.mode == "training" and options.artifacts_dir is not None and not options.trainable:
                raise OnnxportError("tick at least one trainable parameter")
        except OnnxportError as exc:
            self.error.setText(exc.one_line())
            return
        self.error.clear()
        super().accept()


def _set_subtree(item: QStandardItem, state: Qt.CheckState) -> None:
    for r in range(item.rowCount()):
        child = item.child(r, 0)
        if child.isEnabled():
            child.setCheckState(state)
        _set_subtree(child, state)


def _derive_state(item: QStandardItem, recurse: bool = True) -> Qt.CheckState:
    """A group's state from its (enabled) children: Checked, Unchecked or PartiallyChecked."""
    if item.data(NAME_ROLE) is not None:
        return item.checkState()
    states = set()
    for r in range(item.rowCount()):
        child = item.child(r, 0)
        if child.data(NAME_ROLE) is not None and not child.isEnabled():
            continue
        states.add(_derive_state(child) if recurse else child.checkState())
    state = states.pop() if len(states) == 1 else (
        Qt.CheckState.PartiallyChecked if states else Qt.CheckState.Unchecked)
    item.setCheckState(state)
    return state


def _cell(text: str) -> QStandardItem:
    item = QStandardItem(text)
    item.setEditable(False)
    return item
