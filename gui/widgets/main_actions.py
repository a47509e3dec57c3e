"""The main window's actions, its menus and its toolbar.

`build_actions(window)` sets the actions as attributes of the window (`open_action`,
`export_action`, ...) and `recent_menu`; the slots are the window's. Which are enabled is the
window's `_update_actions`.
"""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow


def build_actions(window: QMainWindow) -> None:
    def action(text, slot, shortcut=None, tip=""):
        act = QAction(text, window, triggered=slot, statusTip=tip)
        if shortcut:
            act.setShortcut(shortcut)
        return act

    w = window
    w.open_action = action("&Open…", w.open_dialog, QKeySequence.Open, "Open a model and checkpoint")
    w.export_action = action("&Export…", w.export_dialog, "Ctrl+E", "Export the checked outputs")
    w.quantize_action = action("&Quantize…", lambda: w.export_dialog("int8"), "Ctrl+Shift+Q",
                               "Export and quantize")
    w.validate_action = action("&Validate", w.validate_last, "Ctrl+Shift+V",
                               "Validate the last export against its reference (the eval graph + checkpoint, or the source model)")
    w.deploy_action = action("&Deploy…", w.deploy_flow.choose, "Ctrl+D",
                             "Make a model ready for an ONNX Runtime release or ORT Mobile, checked")
    w.run_on_action = action("&Run on…", w.run_on_flow.choose, "Ctrl+Shift+R",
                             "Run the model on another execution provider (OpenVINO, CUDA, ...) against CPU")
    w.cancel_action = action("&Cancel", w.cancel_job, "Esc", "Stop the running job")
    w.import_action = action("&Import from PyTorch…", w.import_flow.choose, "Ctrl+I",
                             "TorchScript .pt, torch.export .pt2 or a Hugging Face folder")
    w.compare_action = action("Compare &with…", w.compare_dialog, "Ctrl+Shift+C",
                              "Compare the open model (or checkpoint) with another, or two files")
    w.quit_action = action("&Quit", w.close, QKeySequence.Quit)
    menu = w.menuBar().addMenu("&File")
    menu.addAction(w.open_action)
    menu.addAction(w.import_action)
    menu.addAction(w.compare_action)
    w.recent_menu = menu.addMenu("Open &Recent")
    w.state.fill_recent_menu(w.recent_menu, w.open_paths)
    menu.addSeparator()
    menu.addAction(w.quit_action)
    w.model_menu = w.menuBar().addMenu("&Model")
    for act in (w.export_action, w.quantize_action, w.validate_action, w.run_on_action, w.deploy_action,
                w.cancel_action):
        w.model_menu.addAction(act)
    w.toolbar = w.addToolBar("Main")
    w.toolbar.setObjectName("mainToolbar")
    for act in (w.open_action, w.export_action, w.quantize_action, w.validate_action, w.run_on_action,
                w.deploy_action):
        w.toolbar.addAction(act)
