"""Screenshots of the real app at its main steps: `make screenshots` -> build/screenshots/*.png.

Runs the app under Xvfb (24-bit; started here when there is no DISPLAY) with the xcb platform,
drives it like a user (open the bundled example, check an output, export with validation, open
a broken file, look at the preview) and grabs the window from the X server after each step.
Teardown order matters: the windows are closed (the preview releases WebEngine) and the
QApplication is shut down - its X connection closed - before the Xvfb started here is stopped;
the other way round Qt's xcb plugin dies on an X I/O error at exit after all PNGs are written.
The system packages it needs (Xvfb, the xcb libraries, a CJK font for Netron's brackets) are
installed or named by `make screenshots` (scripts/need_debs.sh).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "screenshots"
SCREEN = "1600x1000x24"


def start_xvfb() -> subprocess.Popen | None:
    """An Xvfb of our own on a free display (it writes the number it took to a pipe) when there is
    no DISPLAY; sets DISPLAY. None when a display is there."""
    if os.environ.get("DISPLAY"):
        return None
    if shutil.which("Xvfb") is None:
        sys.exit("screenshots: no DISPLAY and no Xvfb (apt-get install xvfb; `make screenshots` installs it)")
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", SCREEN, "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write,))
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        sys.exit("screenshots: Xvfb did not start")
    os.environ["DISPLAY"] = f":{number}"
    return proc


def main() -> int:
    xvfb = start_xvfb()
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    try:
        return run()
    finally:  # the app is gone by now (run() shut it down): only then the X server goes
        if xvfb is not None:
            xvfb.terminate()
            xvfb.wait(timeout=10)


def run() -> int:
    from onnxport.gui.app import prepare_environment

    prepare_environment()
    from PySide6.QtCore import QCoreApplication, Qt
    from PySide6.QtWidgets import QApplication

    QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)
    import PySide6.QtWebEngineWidgets  # noqa: F401 - before the QApplication
    app = QApplication([])
    try:
        return take_shots(app)
    finally:
        close_app(app)


def close_app(app) -> None:
    """Close every window (the main window's close releases the preview's WebEngine page and
    stops its server), let the deletions run, then shut the QApplication down: its X connection
    closes while the X server is still there."""
    for widget in app.topLevelWidgets():
        widget.close()
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.01)
    app.shutdown()


def take_shots(app) -> int:
    from PySide6.QtCore import QSettings, Qt
    from PySide6.QtWidgets import QMessageBox

    from onnxport.gui.dialogs.export_dialog import ExportDialog
    from onnxport.gui.main_window import MainWindow
    from onnxport.resources import example_files

    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.png"):
        old.unlink()
    tmp = Path(tempfile.mkdtemp(prefix="onnxport-shots-"))
    window = MainWindow(settings=QSettings(str(tmp / "settings.ini"), QSettings.IniFormat))
    window.settings.setValue("export/folder", str(tmp))
    window.resize(1400, 860)  # a laptop's window on a 1600x1000 screen
    window.move(40, 40)
    window.show()

    def pump(seconds: float = 0.3) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            app.processEvents()
            time.sleep(0.01)

    def until(predicate, timeout: float = 60) -> None:
        end = time.perf_counter() + timeout
        while not predicate():
            if time.perf_counter() > end:
                raise TimeoutError("screenshot step timed out")
            pump(0.05)

    def shot(name: str, widget=None) -> None:
        pump(0.4)
        target = widget or window
        screen = app.primaryScreen()
        pixmap = screen.grabWindow(0, target.x(), target.y(), target.frameGeometry().width(),
                                   target.frameGeometry().height())
        path = OUT / f"{name}.png"
        pixmap.save(str(path))
        print(f"wrote {path}")

    shot("01-empty-window")
    loaded = []
    window.loaded.connect(lambda: loaded.append(1))
    window.open_paths([str(p) for p in example_files()])
    until(lambda: loaded)
    until(lambda: "nodes written" in window.plan_panel.text())
    drawn = getattr(window.preview, "wait_rendered", lambda _timeout: 0)  # the graph is in the middle now
    drawn(30)
    shot("02-example-loaded")

    relu = window.model.index_of("/Relu_output_0")
    window.model.setData(relu, Qt.Checked.value, Qt.CheckStateRole)
    window.tree.setCurrentIndex(relu)
    until(lambda: "/Relu_output_0" in window.plan_panel.text())
    drawn(30)
    shot("03-outputs-checked")
    window.model.set_checked("/Relu_output_0", False)

    window.export_dialog()
    dialog = window.findChild(ExportDialog)
    until(lambda: dialog.isVisible())
    dialog.path_edit.setText(str(tmp / "model_inference.onnx"))
    dialog.quantize.setCurrentIndex(dialog.quantize.findData("dynamic"))  # the example gains from int8
    dialog.move(window.x() + 400, window.y() + 250)
    shot("04-export-dialog", window)
    dialog.quantize.setCurrentIndex(dialog.quantize.findData("static"))  # every choice of `onnxport quantize`
    dialog.options_box.more.setChecked(True)
    shot("04b-export-static-options", window)
    dialog.options_box.more.setChecked(False)
    dialog.quantize.setCurrentIndex(dialog.quantize.findData("dynamic"))
    finished = []
    window.exportFinished.connect(lambda r: finished.append(r))
    dialog._accept()
    until(lambda: finished)
    shot("05-export-done-report")

    # the Deploy step after the export: ORT Mobile for the model just exported
    window.deploy_flow.choose()
    deploy_dialog = window.deploy_flow.dialog
    until(lambda: deploy_dialog.isVisible())
    deploy_dialog.dims.setText("batch=1")
    deploy_dialog.move(window.x() + 380, window.y() + 220)
    shot("05b-deploy-dialog", window)
    deployed = []
    window.deploy_flow.deployed.connect(lambda r: deployed.append(r))
    deploy_dialog._accept()
    until(lambda: deployed)
    shot("05c-deploy-done")

    if hasattr(window.preview, "wait_rendered"):
        window.tabs.setCurrentWidget(window.preview)
        window.preview.wait_rendered(30)
        shot("06-preview")
        window.preview.set_mode("original")  # the whole eval graph, what the export drops dimmed
        window.preview.wait_rendered(30)
        until(lambda: "drops" in window.preview.status.text(), timeout=10)
        shot("06b-original-kept-dropped")
        window.preview.set_mode("pruned")
        window.preview.wait_rendered(30)
        from cut_shots import cut_shots  # "Start here" on the graph, a weight's histogram

        cut_shots(window, shot, until, OUT)

    broken = tmp / "broken.onnx"
    broken.write_bytes(b"\x08\x07" + bytes(range(256)) * 4)
    errors = []
    window.errorShown.connect(lambda text: errors.append(text))
    window.open_paths([str(broken)])
    until(lambda: errors)
    box = next(w for w in app.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible())
    box.move(window.x() + 450, window.y() + 300)
    shot("07-error-dialog", window)
    box.close()
    extra_shots(window, shot)
    # the error map on the preview, the before/after table (scripts/accuracy_shots.py)
    from accuracy_shots import accuracy_shots

    accuracy_shots(window, tmp, shot, until)
    from compare_shots import compare_shots  # File > Compare with: two models, two checkpoints

    compare_shots(window, tmp, shot, until)
    from run_on_shots import run_on_shots  # Model > Run on: the graph painted by provider

    run_on_shots(window, tmp, shot, until)
    window.close()
    pump(0.5)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def extra_shots(window, shot) -> None:
    """Import from PyTorch's first question and the Help menu's shortcuts."""
    from onnxport.gui.dialogs.help_dialogs import ShortcutsDialog
    from onnxport.gui.dialogs.import_source_picker import source_kind_box

    box = source_kind_box(window)
    box.open()
    box.move(window.x() + 450, window.y() + 300)
    shot("10-import-from-pytorch", window)
    box.close()
    dialog = ShortcutsDialog(window)
    dialog.open()
    dialog.move(window.x() + 480, window.y() + 200)
    shot("11-keyboard-shortcuts", window)
    dialog.close()


if __name__ == "__main__":
    sys.exit(main())
