"""What the main window does when a job fails: show what was written, ask, or say why.

An export whose float model was written before a later step failed is shown as the export (its
validation included) and the failure is said; a refusal a choice lifts (the checkpoint policy's)
is asked about and the export started again with it; anything else is an error dialog.
"""

from __future__ import annotations

from .allow_question import allowable, ask_to_allow
from .error_dialog import error_text, show_error
from .export_dialog import say_after_export_failure


def on_job_failed(window, name: str, exc: BaseException, details: str) -> None:
    """Handle job `name`'s failure `exc` (`details`: its traceback, for the dialog and the log)."""
    text = error_text(exc)
    written = getattr(exc, "written", None)  # (ExportResult, PostExportResult): the float model stays
    if written is not None:
        window._exported(written)
        window.log_line(say_after_export_failure(window, exc, details, written, window._last_choices))
    elif name == "export" and allowable(exc) is not None:
        window.log_line(f"{name} failed: {text}")
        choices, allowed = window._export_asked
        ask_to_allow(window, exc, lambda choice: window.start_export(choices, allowed | {choice}))
    else:
        window.log_line(f"{name} failed: {text}")
        show_error(window, f"{name.capitalize()} failed", exc, details)
    window.errorShown.emit(text)
