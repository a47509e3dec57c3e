"""Ask before the app runs a PyTorch program's code: once per file, remembered for the session.

A TorchScript or `.pt2` file is a program: importing it runs its author's code (see
core/pytorch/trust.py). Before the import flow describes one, `trust_for_import` asks the user a
QMessageBox question that says why; a Yes is remembered in `SESSION_TRUST` (by resolved path), a
No imports nothing and is asked again next time. Hugging Face folders and parameter files are data:
nothing is asked. The answer reaches the core as `trust_code` (describe job, then
`TorchImportOptions.trust_code` through the import dialog).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMessageBox, QWidget

from onnxport.core.pytorch.trust import needs_trust, trust_reason
from onnxport.core.util.errors import OnnxportError

from ..widgets import plain_text


class TrustedPrograms:
    """Program files the user said to trust in this session, by resolved path."""

    def __init__(self) -> None:
        self._paths: set[Path] = set()

    def __contains__(self, path: object) -> bool:
        return isinstance(path, (str, Path)) and Path(path).resolve() in self._paths

    def add(self, path: str | Path) -> None:
        self._paths.add(Path(path).resolve())


SESSION_TRUST = TrustedPrograms()


def trust_for_import(parent: QWidget | None, source: Path, trusted: TrustedPrograms = SESSION_TRUST) -> bool | None:
    """The `trust_code` to import `source` with: False for data (a Hugging Face folder: nothing to ask),
    True for a program file the user trusts (asked once per file and session), None if the user declined."""
    try:
        kind = needs_trust(source)
    except OnnxportError:
        return False  # unreadable: the describe job reports why
    if kind is None:
        return False
    if source in trusted:
        return True
    text = (f"{source.name}: {trust_reason(kind)}.\n\nImporting it runs that code with your permissions: it "
            "can read, change or delete your files. Import it only if you trust where it came from.\n\n"
            f"Run the code in {source.name}?")
    buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
    answer = plain_text.ask(parent, "Run this program's code?", text, buttons, QMessageBox.StandardButton.No)
    if answer != QMessageBox.StandardButton.Yes:
        return None
    trusted.add(source)
    return True
