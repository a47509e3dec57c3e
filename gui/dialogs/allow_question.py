"""The app's side of the checkpoint policy's choices: ask, when the core refuses an export that a
choice would allow (`params.checkpoint_fit`: a partial embed, parameter inputs kept as inputs).

The CLI takes the same choices as options (`--allow-partial`, `--keep-parameter-inputs`). The box
says the core's one line as plain text (it names tensors) and is shown with `open()`, so the event
loop keeps running; `on_allow(choice)` runs when the user picks the choice.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QMessageBox, QWidget

from onnxport.core.params.checkpoint_fit import ALLOW_PARTIAL, KEEP_PARAMETER_INPUTS

from ..widgets.plain_text import message_box

CHOICES = {
    ALLOW_PARTIAL: ("Embed what matches", "The model's own values stay for the rest; the report lists them."),
    KEEP_PARAMETER_INPUTS: ("Keep them as inputs", "The exported model then needs them as inputs on every run."),
}


def allowable(exc: BaseException) -> str | None:
    """The choice that would lift the core's refusal `exc`, if any the app offers."""
    choice = getattr(exc, "allow", None)
    return choice if choice in CHOICES else None


def ask_to_allow(parent: QWidget, exc: BaseException, on_allow: Callable[[str], None]) -> QMessageBox:
    """Ask whether to export with the choice that lifts `exc` (see the module docstring)."""
    choice = allowable(exc)
    label, consequence = CHOICES[choice]
    box = message_box(QMessageBox.Icon.Warning, "Export refused", f"{exc.one_line()}\n\n{consequence}",
                      QMessageBox.StandardButton.Cancel, parent)
    box.setObjectName("allowQuestion")
    allow = box.addButton(label, QMessageBox.ButtonRole.AcceptRole)
    box.buttonClicked.connect(lambda button: on_allow(choice) if button is allow else None)
    box.open()
    return box
