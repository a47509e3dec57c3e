"""The Export dialog's quantization choices: every option of `onnxport quantize`, as widgets.

`QuantizeBox.set_mode(mode)` shows the rows that mode reads; `options()` builds the
`QuantizeOptions` the CLI builds from the same choices (raises `OnnxportError` naming a bad
entry); `set_options(options)` shows remembered ones. In sight: the accuracy target (or none),
calibration data (static: a file or folder, or generated inputs), validation inputs and the int8
path; under "More options": the tokenizer, per-channel and 7/8-bit weights, op types, nodes kept
in float, fp16's float16 inputs/outputs and float32 op types, int4's block size, ORT's
pre-processing. Paths are shown as typed (plain text).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from onnxport.core.quantize.cpu_int8 import PATHS, detect
from onnxport.core.quantize.modes import DYNAMIC_OP_TYPES, STATIC_OP_TYPES
from onnxport.core.quantize.options import QuantizeOptions
from onnxport.core.util.errors import OnnxportError

INT8 = ("dynamic", "static")
ALL = ("dynamic", "static", "fp16", "int4")
PER_CHANNEL = [("Default (per-channel first)", None), ("Per channel", True), ("Per tensor", False)]
WEIGHT_BITS = [("Default (what the int8 path needs)", None), ("7-bit (reduce range)", True), ("8-bit", False)]
DEFAULT_OPS = {"dynamic": DYNAMIC_OP_TYPES, "static": STATIC_OP_TYPES}


def names(text: str) -> tuple[str, ...]:
    """'a, b,c' -> ('a', 'b', 'c') (as the CLI reads `--exclude a,b --exclude c`)."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _existing(text: str, what: str) -> Path | None:
    if not text.strip():
        return None
    path = Path(text.strip()).expanduser()
    if not path.exists():
        raise OnnxportError(f"{what}: {path}: no such file or folder")
    return path


def _select(box: QComboBox, value) -> None:
    """Select the item whose data is `value` (None included: findData cannot look for None)."""
    box.setCurrentIndex(next((i for i in range(box.count()) if box.itemData(i) == value), 0))


class QuantizeBox(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mode: str | None = None
        self.target = QDoubleSpinBox(decimals=4, minimum=0.0001, maximum=1.0, singleStep=0.001, value=0.99)
        self.target.setToolTip("The cosine every output must keep against the float32 model (a classifier "
                               "must also pick the same class)")
        self.no_target = QCheckBox("No target: write what is asked, report the figures")
        self.no_target.toggled.connect(lambda on: self.target.setEnabled(not on))
        self.calibration = QLineEdit(placeholderText="real inputs: .npz, .npy/.npz folder, .txt")
        self.generated = QCheckBox("random inputs")
        self.generated.setToolTip("Calibrate on generated inputs anyway (ranges from random inputs rarely fit "
                                  "real data)")
        self.generated.toggled.connect(lambda on: self.calibration.setEnabled(not on))
        self.calibration.setToolTip("Inputs like the real ones: an .npz named like the inputs, a folder of "
                                    ".npy/.npz, or a .txt of lines for a Hugging Face model's tokenizer")
        self.validation = QLineEdit(placeholderText="default: generated (a text model: bundled sentences)")
        self.int8_path = QComboBox()
        self.int8_path.addItem(f"Auto: this CPU ({detect().label})", "auto")
        for name, path in PATHS.items():
            self.int8_path.addItem(f"{path.label} ({name}, {path.weight_bits}-bit weights)", name)
        self.tokenizer = QLineEdit(placeholderText="Hugging Face tokenizer folder (default: beside the model)")
        self.per_channel, self.weight_bits = self._combo(PER_CHANNEL), self._combo(WEIGHT_BITS)
        self.op_types = QLineEdit()
        self.exclude = QLineEdit(placeholderText="node names, comma-separated")
        self.fp16_io = QCheckBox("float16 inputs and outputs too")
        self.block_ops = QLineEdit(placeholderText="op types kept in float32, comma-separated")
        self.block_size = QSpinBox(minimum=1, maximum=1 << 16, value=32)
        self.preprocess = QCheckBox("ONNX Runtime's pre-processing (optimizer, shape inference)", checked=True)
        self.more = QCheckBox("More options")
        self.more.toggled.connect(lambda _on: self._show_rows())
        self.form = QFormLayout(self)
        self.form.setContentsMargins(0, 0, 0, 0)
        self._rows: list[tuple[QWidget, tuple[str, ...], bool]] = []  # (field, modes, under "More options")
        self._row("Accuracy target", self._line(self.target, self.no_target), ALL)
        self._row("Calibration data", self._line(self.calibration, self._browse(self.calibration, True),
                                                 self._browse(self.calibration, False), self.generated), ("static",))
        self._row("Validation inputs", self._line(self.validation, self._browse(self.validation, True),
                                                  self._browse(self.validation, False)), ALL)
        self._row("int8 path", self.int8_path, INT8)
        self.form.addRow("", self.more)
        self._row("Tokenizer", self._line(self.tokenizer, self._browse(self.tokenizer, False)), ALL, True)
        self._row("Weight scales", self.per_channel, INT8, True)
        self._row("Weight bits", self.weight_bits, INT8, True)
        self._row("Op types", self.op_types, INT8, True)
        self._row("Keep in float", self.exclude, ALL, True)
        self._row("", self.fp16_io, ("fp16",), True)
        self._row("Float32 op types", self.block_ops, ("fp16",), True)
        self._row("Block size", self.block_size, ("int4",), True)
        self._row("", self.preprocess, ("dynamic", "static", "int4"), True)
        self.set_mode(None)

    @staticmethod
    def _combo(items) -> QComboBox:
        box = QComboBox()
        for label, value in items:
            box.addItem(label, value)
        return box

    @staticmethod
    def _line(*widgets: QWidget) -> QWidget:
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        for i, widget in enumerate(widgets):
            layout.addWidget(widget, 1 if i == 0 else 0)
        return row

    def _browse(self, edit: QLineEdit, file: bool) -> QPushButton:
        def pick() -> None:
            start = edit.text() or str(Path.home())
            path = QFileDialog.getOpenFileName(self, "Choose a file", start)[0] if file else \
                QFileDialog.getExistingDirectory(self, "Choose a folder", start)
            if path:
                edit.setText(path)

        button = QPushButton("File…" if file else "Folder…")
        button.clicked.connect(pick)
        return button

    def _row(self, label: str, field: QWidget, modes: tuple[str, ...], more: bool = False) -> None:
        self.form.addRow(label, field)
        self._rows.append((field, modes, more))

    def set_mode(self, mode: str | None) -> None:
        """Show the rows `mode` reads (None: no quantization, the box hides)."""
        self.mode = mode
        self.op_types.setPlaceholderText("default: " + ",".join(DEFAULT_OPS.get(mode or "", ())))
        self.setVisible(mode is not None)
        self._show_rows()

    def _show_rows(self) -> None:
        for field, modes, more in self._rows:
            self.form.setRowVisible(field, self.mode in modes and (not more or self.more.isChecked()))

    def options(self) -> QuantizeOptions:
        """The choices as `quantize` takes them (see the module docstring)."""
        generated = self.generated.isChecked()
        return QuantizeOptions(
            calibration=None if generated else _existing(self.calibration.text(), "calibration data"),
            calibration_required=not generated,
            per_channel=self.per_channel.currentData(), reduce_range=self.weight_bits.currentData(),
            int8_path=self.int8_path.currentData(), op_types=names(self.op_types.text()) or None,
            exclude_nodes=names(self.exclude.text()), keep_io_types=not self.fp16_io.isChecked(),
            block_ops=names(self.block_ops.text()),
            accuracy_target=None if self.no_target.isChecked() else round(self.target.value(), 6),
            validation_inputs=_existing(self.validation.text(), "validation inputs"),
            preprocess=self.preprocess.isChecked(), tokenizer=_existing(self.tokenizer.text(), "tokenizer"),
            block_size=self.block_size.value())

    def set_options(self, o: QuantizeOptions) -> None:
        """Show `o` (remembered from the last export of this model)."""
        self.no_target.setChecked(o.accuracy_target is None)
        if o.accuracy_target is not None:
            self.target.setValue(o.accuracy_target)
        self.generated.setChecked(not o.calibration_required and o.calibration is None)
        for edit, value in ((self.calibration, o.calibration), (self.validation, o.validation_inputs),
                            (self.tokenizer, o.tokenizer)):
            edit.setText(str(value) if isinstance(value, (str, Path)) else "")
        for box, value in ((self.int8_path, str(o.int8_path or "auto")), (self.per_channel, o.per_channel),
                           (self.weight_bits, o.reduce_range)):
            _select(box, value)
        self.op_types.setText(",".join(o.op_types or ()))
        self.exclude.setText(",".join(o.exclude_nodes))
        self.fp16_io.setChecked(not o.keep_io_types)
        self.block_ops.setText(",".join(o.block_ops))
        self.block_size.setValue(o.block_size)
        self.preprocess.setChecked(o.preprocess)
        advanced = (o.tokenizer, o.per_channel is not None, o.reduce_range is not None, o.op_types, o.exclude_nodes,
                    not o.keep_io_types, o.block_ops, o.block_size != 32, not o.preprocess)
        self.more.setChecked(any(advanced))
