"""Importing from PyTorch as the user walks through it: pick a source, the trust prompt (for a
program's code), describe it in the worker, the import dialog, the import job, then open what
it wrote in the window.

Kept apart from the main window, which hands over what the flow needs: its `JobRunner`, its log
and its `open_paths`. The dialogs (and the core's PyTorch modules behind them) load on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QWidget

from ..jobs import core_calls
from ..jobs.runner import JobRunner


class ImportFlow:
    def __init__(self, parent: QWidget, runner: JobRunner, log: Callable[[str], None],
                 open_paths: Callable[[list[Path]], None]) -> None:
        self.parent = parent
        self.runner = runner
        self.log = log
        self.open_paths = open_paths

    def choose(self) -> None:
        """Ask whether the source is a program file or a Hugging Face folder, pick it, import it."""
        from .import_source_picker import pick_source

        path = pick_source(self.parent)
        if path is not None:
            self.start(path)

    def start(self, source: Path) -> None:
        """Ask before running a program's code (once per file), describe the source in the worker,
        then ask how to export it (gui/dialogs/import_dialog.py)."""
        from .trust_prompt import trust_for_import

        trust = trust_for_import(self.parent, source)
        if trust is None:
            self.log(f"not imported: {source.name} (its code was not trusted)")
            return
        self.runner.run("describe", core_calls.describe_job(source, trust), self._described)

    def _described(self, info) -> None:
        from .import_dialog import ImportDialog

        dialog = ImportDialog(info, self.parent)
        dialog.accepted.connect(lambda: self.runner.run("import", core_calls.torch_import_job(dialog.options()),
                                                        self._imported))
        dialog.open()

    def _imported(self, result) -> None:
        for note in result.notes:
            self.log(note)
        self.log(f"imported: {', '.join(str(p) for p in result.open_paths)}")
        if result.open_paths:  # after this job has finished, so the window is free to open them
            QTimer.singleShot(0, lambda: self.open_paths(result.open_paths))
