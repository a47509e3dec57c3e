"""Screenshots of Run on (issue 41): the dialog listing the providers found, and the graph painted
by provider after a run on OpenVINO (the nodes it took in blue, the Hardmax it does not take, which
falls back to CPU, in orange), with the Report tab's figures beside it.

Called by scripts/screenshots.py with its window and helpers; needs .venv-openvino
(`make runtime-openvino`): without it, says so and takes no shot.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper


def fallback_model(path: Path) -> Path:
    """x[1, 16] -> MatMul, Add, Relu, Hardmax (OpenVINO's provider does not take it), Mul, MatMul, Softmax."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "fc1.weight"),
             numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "fc1.bias"),
             numpy_helper.from_array(rng.standard_normal((32, 10)).astype(np.float32), "fc2.weight")]
    nodes = [helper.make_node("MatMul", ["x", "fc1.weight"], ["h"], name="/fc1/MatMul"),
             helper.make_node("Add", ["h", "fc1.bias"], ["hb"], name="/fc1/Add"),
             helper.make_node("Relu", ["hb"], ["a"], name="/act/Relu"),
             helper.make_node("Hardmax", ["a"], ["mask"], name="/pick/Hardmax", axis=-1),
             helper.make_node("Mul", ["a", "mask"], ["kept"], name="/pick/Mul"),
             helper.make_node("MatMul", ["kept", "fc2.weight"], ["logits"], name="/fc2/MatMul"),
             helper.make_node("Softmax", ["logits"], ["probabilities"], name="/softmax/Softmax", axis=-1)]
    graph = helper.make_graph(nodes, "fallback", [helper.make_tensor_value_info("x", T.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("probabilities", T.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def run_on_shots(window, tmp: Path, shot, until) -> None:
    from PySide6.QtWidgets import QApplication, QMessageBox

    from onnxport.core.runtimes.discovery import find_runtimes

    for box in QApplication.topLevelWidgets():  # an earlier step's message, still open
        if isinstance(box, QMessageBox) and box.isVisible():
            box.close()

    runtimes = find_runtimes()
    if not any("OpenVINOExecutionProvider" in r.providers for r in runtimes):
        print("run-on shots skipped: no OpenVINO runtime (make runtime-openvino)")
        return
    loaded = []
    window.loaded.connect(lambda: loaded.append(1))
    window.last_export = None  # Run on runs the opened file
    window.open_paths([str(fallback_model(tmp / "fallback.onnx"))])
    until(lambda: loaded)
    getattr(window.preview, "wait_rendered", lambda _timeout: 0)(30)
    window.run_on_flow.runtimes = runtimes  # found above: the dialog lists them at once
    window.run_on_flow.choose()
    dialog = window.run_on_flow.dialog
    until(lambda: dialog.isVisible() and dialog.provider.isEnabled())
    dialog.provider.setCurrentIndex(dialog.provider.findData("OpenVINOExecutionProvider"))
    dialog.options.setText("device_type=CPU")
    dialog.move(window.x() + 400, window.y() + 250)
    shot("14-run-on-dialog", window)
    shown = []
    window.run_on_flow.shown.connect(lambda report: shown.append(report))
    dialog.accept()
    until(lambda: shown, timeout=180)
    until(lambda: window.error_overlay.last_painted > 0, timeout=60)
    shot("15-graph-painted-by-provider")
