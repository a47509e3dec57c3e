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
    if argv:
        window.open_paths(argv)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
