"""The app's boundary for exceptions raised outside its jobs: a slot, a paint, a timer, a thread.

Jobs catch their own (gui/jobs/worker.py emits them; the window shows them). Anything else Qt calls
into Python that raises would print a traceback on stderr (PySide6 hands it to `sys.excepthook`)
and the user would see nothing. `install_error_hook(app)` makes such an exception, and one ending
a Python thread (`threading.excepthook`), one entry in the error log (core/util/error_log.py),
one line on stderr without a traceback, and an error dialog posted to the GUI thread's event loop
(never opened inside the paint or slot that failed); while one is open, later errors only go to
the log. An exception before the event loop runs (building the window) still gets the line and
the log entry. `uninstall()` puts the previous hooks back.
"""

from __future__ import annotations

import sys
import threading
import traceback

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QApplication, QMessageBox

from onnxport.core.util.error_log import error_log_path, log_error
from onnxport.core.util.text import shown

from .error_dialog import error_text, show_logged_error

TITLE = "Unexpected error"


class ErrorHook(QObject):
    """See the module docstring."""

    raised = Signal(object, object)  # (exception, log path or None), from any thread

    def __init__(self, app: QApplication) -> None:
        super().__init__(app)
        self.box: QMessageBox | None = None
        self.raised.connect(self._show, Qt.ConnectionType.QueuedConnection)
        self._previous = (sys.excepthook, threading.excepthook)
        sys.excepthook = self._excepthook
        threading.excepthook = self._thread_excepthook

    def uninstall(self) -> None:
        sys.excepthook, threading.excepthook = self._previous

    def _excepthook(self, exc_type, exc, tb) -> None:
        if issubclass(exc_type, KeyboardInterrupt):  # Ctrl-C in the terminal: as Python says it
            self._previous[0](exc_type, exc, tb)
            return
        self._report(exc, "".join(traceback.format_exception(exc_type, exc, tb)))

    def _thread_excepthook(self, args) -> None:
        if issubclass(args.exc_type, SystemExit):
            return
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        self._report(args.exc_value, text, f" (thread {args.thread.name if args.thread else '?'})")

    def _report(self, exc: BaseException, text: str, where: str = "") -> None:
        log = log_error(TITLE + where, exc, text)
        details = f"details in {log}" if log else f"no details: {error_log_path()} could not be written"
        try:
            print(f"onnxport: internal error: {shown(error_text(exc))} ({details})", file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):  # no stderr (closed, or none at all): the dialog says it
            pass
        try:
            self.raised.emit(exc, log)
        except RuntimeError:  # the app is gone (an exception at exit): the line and the log said it
            pass

    def _show(self, exc: BaseException, log) -> None:
        if self.box is not None and self.box.isVisible():
            return  # one dialog at a time; this one is in the log
        parent = QApplication.activeWindow() or next((w for w in QApplication.topLevelWidgets()
                                                       if w.isVisible() and not isinstance(w, QMessageBox)), None)
        try:
            self.box = show_logged_error(parent, TITLE, exc, log)
        except Exception as failed:  # noqa: BLE001 - never back into the hook: that would loop
            log_error(f"{TITLE} (its dialog)", failed, traceback.format_exc())


def install_error_hook(app: QApplication) -> ErrorHook:
    return ErrorHook(app)
