"""Start the app: `onnxport-gui [FILES...]`, `python -m onnxport.gui`, `onnxport gui`."""

from __future__ import annotations

import os
import sys


def prepare_environment() -> None:
    """Qt WebEngine refuses to start as root without --no-sandbox (containers, CI)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        flags = os.environ.get("QTWEBENGINE_CHROMIUM_FLAGS", "")
        if "--no-sandbox" not in flags:
            os.environ["QTWEBENGINE_CHROMIUM_FLAGS"] = (flags + " --no-sandbox").strip()


EXIT_SIGTERM = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended
TERMINATE_WAIT_MS = 10_000  # how long a running job gets to reach its next cancel check


def handle_sigterm(app, window):
    """SIGTERM ends the app without leaving temp files: the running job is cancelled (the core
    removes its temps at its next check; a job past its commit point finishes its write), the
    temps still registered (core/atomic.py) are removed, one line goes to stderr and the app
    exits with 143. The core installs no handler; this entry point does.

    Why a wakeup fd: Python runs a signal handler only when the main thread runs Python code, and
    that thread sits in Qt's event loop; the byte the C handler writes to the socket wakes a
    QSocketNotifier, whose (Python) slot lets the handler run. Returns what must stay alive."""
    import signal
    import socket

    from PySide6.QtCore import QSocketNotifier, QThreadPool

    from onnxport.core.atomic import remove_live_temps

    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno())
    notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read, app)

    def drain(*_args) -> None:
        try:
            reader.recv(256)
        except OSError:
            pass

    def on_sigterm(signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: let the cleanup finish
        if window.job is not None:
            window.job.cancel()
        finished = QThreadPool.globalInstance().waitForDone(TERMINATE_WAIT_MS)
        remove_live_temps()
        print("onnxport: terminated by SIGTERM; unfinished files were removed", file=sys.stderr, flush=True)
        if not finished:  # a job stuck in native code: do not wait for it at interpreter exit
            os._exit(EXIT_SIGTERM)
        window.close()
        app.exit(EXIT_SIGTERM)

    notifier.activated.connect(drain)
    signal.signal(signal.SIGTERM, on_sigterm)
    return reader, writer, notifier


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prepare_environment()
    from PySide6.QtCore import QCoreApplication, Qt
    from PySide6.QtWidgets import QApplication

    QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)  # WebEngine wants it before the app
    try:
        import PySide6.QtWebEngineWidgets  # noqa: F401 - must load before the QApplication exists
    except ImportError:
        pass  # the preview panel will say it is unavailable
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setOrganizationName("onnxport")
    app.setApplicationName("onnxport")
    from .main_window import MainWindow

    window = MainWindow()
    window.show()
    keep = handle_sigterm(app, window)  # noqa: F841 - the notifier and its sockets live while the app runs
    if argv:
        window.open_paths(argv)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
