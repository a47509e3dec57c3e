"""Screenshots of where accuracy is lost (issue 15): the error map on the preview, the before/after table.

Called by scripts/screenshots.py with its window and helpers: builds a small model whose int8
quantization loses accuracy unevenly (an MLP of four layers, one fed by outlier activations), opens
it, exports it with dynamic int8 (no accuracy target: it would refuse) and validation, and shoots
the Preview tab (nodes coloured by the error they add, the legend) and the Report tab (where the
error jumps, the before/after table).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

WIDTHS = (64, 256, 256, 128, 10)


def sizeable_model(path: Path) -> Path:
    """x -> 4 x (MatMul, Add, Relu/Softmax); layer 2's inputs carry a few large outliers."""
    rng = np.random.default_rng(3)
    inits, nodes, current = [], [], "x"
    for i, (d_in, d_out) in enumerate(zip(WIDTHS, WIDTHS[1:]), start=1):
        w = (rng.standard_normal((d_in, d_out)) / np.sqrt(d_in)).astype(np.float32)
        b = (0.1 * rng.standard_normal(d_out)).astype(np.float32)
        if i == 2:
            w[:3] *= 40.0  # a few input channels dominate: int8 activations lose the rest
        if i == len(WIDTHS) - 1:
            w *= 4.0  # clear winners: int8's error shows on the map without flipping a held-out class
        inits += [numpy_helper.from_array(w, f"fc{i}.weight"), numpy_helper.from_array(b, f"fc{i}.bias")]
        nodes.append(helper.make_node("MatMul", [current, f"fc{i}.weight"], [f"fc{i}.mm"], name=f"/fc{i}/MatMul"))
        nodes.append(helper.make_node("Add", [f"fc{i}.mm", f"fc{i}.bias"], [f"fc{i}.out"], name=f"/fc{i}/Add"))
        last = i == len(WIDTHS) - 1
        out = "probabilities" if last else f"act{i}"
        op = helper.make_node("Softmax", [f"fc{i}.out"], [out], name="/softmax/Softmax", axis=-1) if last else \
            helper.make_node("Relu", [f"fc{i}.out"], [out], name=f"/act{i}/Relu")
        nodes.append(op)
        current = out
    graph = helper.make_graph(nodes, "accuracy_demo", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", WIDTHS[0]])],
                              [helper.make_tensor_value_info("probabilities", T.FLOAT, ["batch", WIDTHS[-1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def accuracy_shots(window, tmp: Path, shot, until) -> None:
    """Export `sizeable_model` with dynamic int8 in `window`; `shot(name)` the overlay and the table."""
    from onnxport.core.quantize.options import QuantizeOptions
    from onnxport.gui.dialogs.export_dialog import ExportChoices

    model = sizeable_model(tmp / "accuracy_demo.onnx")
    loaded = []
    window.loaded.connect(lambda: loaded.append(1))
    window.open_paths([str(model)])
    until(lambda: loaded)
    window.tabs.setCurrentWidget(window.preview)
    if hasattr(window.preview, "wait_rendered"):
        window.preview.wait_rendered(30)
    painted = []
    window.error_overlay.painted.connect(painted.append)
    finished, errors = [], []
    window.exportFinished.connect(finished.append)
    window.errorShown.connect(errors.append)
    no_target = QuantizeOptions(accuracy_target=None)  # the figures, measured: int8 loses too much here
    window.start_export(ExportChoices(tmp / "accuracy_demo_inference.onnx", quantize="dynamic", validate=True,
                                      quantize_options=no_target))
    until(lambda: (finished or errors) and window.job is None, timeout=120)
    if errors:  # the quantizer refused (its accuracy target): say so, keep the other screenshots
        print(f"accuracy screenshots skipped: {errors[0]}")
        return
    window.tabs.setCurrentWidget(window.preview)
    until(lambda: any(painted), timeout=30)
    shot("08-accuracy-overlay")
    window.tabs.setCurrentWidget(window.report_tab)
    from PySide6.QtWidgets import QDockWidget

    log = window.findChild(QDockWidget, "logDock")
    log.hide()  # the room the table gets with the log closed
    shot("09-before-after-diff")
    log.show()
