"""The "Run on" dialog: the execution providers of the ONNX Runtime builds found, one to run on.

It only gathers the choice; the flow (run_on_flow.py) finds the runtimes and runs the model in the
worker. Until the runtimes are described (a child in each: a second or two) the list says so;
then it lists each provider other than CPU with its runtime (package, version, Python), or, with
none, how to get one (`make runtime-openvino`). Provider options are typed as on the command line
(`precision=ACCURACY, device_type=CPU`) and checked before the dialog closes.
"""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QDialog, QDialogButtonBox, QFormLayout, QLineEdit, QVBoxLayout

from onnxport.core.runtimes.names import CPU, how_to_get, short_name

from ..widgets.plain_text import plain_label

HIDDEN = {CPU, "AzureExecutionProvider"}  # the reference itself; a remote endpoint, not a device


def parse_options(text: str) -> dict[str, str]:
    """`KEY=VALUE, KEY=VALUE` as a dict; `ValueError` naming the entry that is not KEY=VALUE."""
    options = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"'{item}' is not KEY=VALUE")
        options[key.strip()] = value.strip()
    return options


def choices(runtimes: list) -> list[tuple[str, str]]:
    """(label, provider) of every provider the runtimes run, CPU and remote ones aside."""
    found = []
    for runtime in runtimes:
        for provider in runtime.providers:
            if provider not in HIDDEN and provider not in (p for _, p in found):
                found.append((f"{short_name(provider)}: {runtime.package or 'onnxruntime'} {runtime.ort_version} "
                              f"({runtime.python})", provider))
    return found


class RunOnDialog(QDialog):
    def __init__(self, parent, model_name: str) -> None:
        super().__init__(parent)
        self.setWindowTitle("Run on an execution provider")
        self.provider = QComboBox()
        self.provider.addItem("Looking for ONNX Runtime builds…")
        self.provider.setEnabled(False)
        self.options = QLineEdit()
        self.options.setPlaceholderText("e.g. precision=ACCURACY, device_type=CPU")
        self.note = plain_label(f"Runs {model_name} there and on this environment's CPU, on the same inputs: "
                                "the nodes each ran, the accuracy against CPU, and the latency side by side.")
        self.problem = plain_label()
        form = QFormLayout()
        form.addRow("Run on:", self.provider)
        form.addRow("Provider options:", self.options)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(False)
        layout = QVBoxLayout(self)
        layout.addWidget(self.note)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(self.buttons)

    def set_runtimes(self, runtimes: list) -> None:
        self.provider.clear()
        found = choices(runtimes)
        for label, provider in found:
            self.provider.addItem(label, provider)
        if not found:
            self.provider.addItem("no ONNX Runtime build with another provider was found")
            self.problem.setText(f"For OpenVINO: {how_to_get('OpenVINOExecutionProvider')}.")
        self.provider.setEnabled(bool(found))
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(bool(found))

    def failed(self, exc: BaseException) -> None:
        self.provider.clear()
        self.provider.addItem("the runtimes could not be listed")
        self.problem.setText(str(exc))

    def choice(self) -> tuple[str, dict[str, str]]:
        return self.provider.currentData(), parse_options(self.options.text())

    def _accept(self) -> None:
        try:
            self.choice()
        except ValueError as exc:
            self.problem.setText(f"Provider options: {exc}")
            return
        self.accept()
