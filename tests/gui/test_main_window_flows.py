"""Flows that start in the window and end in the core: requantize from the report, PyTorch import."""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
import pytest

from onnxport.gui.dialogs.export_dialog import ExportChoices

pytestmark = pytest.mark.gui


@pytest.fixture
def sizeable_example(tmp_path) -> list[Path]:
    """Like the bundled example (eval graph + checkpoint), with weights big enough that int8 makes the
    model smaller: a quantization that gains nothing is refused."""
    from tests.core.model_builders import eval_like_mlp, mlp_weights
    from tests.support.checkpoint_writer import write_checkpoint

    folder = tmp_path / "example"
    folder.mkdir()
    onnx.save(eval_like_mlp(d_hidden=256), folder / "eval_model.onnx")
    write_checkpoint(folder / "checkpoint", mlp_weights(seed=4, d_hidden=256))  # int8 holds its target on both CPU paths
    return [folder / "eval_model.onnx", folder / "checkpoint"]


def test_requantize_keeps_the_chosen_nodes_in_float(qtbot, window, sizeable_example, tmp_path):
    from onnxport.core.quantize.quantize import quantize_info

    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths(sizeable_example)
    out = tmp_path / "model.onnx"
    with qtbot.waitSignal(window.exportFinished, timeout=300_000):
        window.start_export(ExportChoices(out, quantize="dynamic", validate=True))
    qtbot.waitUntil(lambda: window.job is None, timeout=300_000)
    assert window.last_quantized is not None and window.last_quantized.exists()
    node = next(n.name for n in onnx.load(out).graph.node if n.op_type in ("Gemm", "MatMul"))
    with qtbot.waitSignal(window.jobEnded, timeout=300_000) as ended:
        window.report_view.requantizeRequested.emit([node])  # what the report's button emits
    assert ended.args == ["requantize", "returned"]
    info = quantize_info(window.last_quantized)
    kept = info["excluded_nodes"] + info["kept_float_nodes"]  # ORT's fusions rename a node `n` to `n/<Fusion>`
    assert any(k == node or k.startswith(node + "/") for k in kept)


@pytest.mark.torch
def test_import_a_torchscript_program_ends_in_the_outputs_tree(qtbot, window, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from PySide6.QtWidgets import QMessageBox

    from onnxport.gui.widgets import plain_text

    # the user trusts the program's code when asked (gui/dialogs/trust_prompt.py)
    monkeypatch.setattr(plain_text, "ask", lambda *a, **k: QMessageBox.StandardButton.Yes)
    from onnxport.core.pytorch.sources import InputSpec
    from onnxport.gui.dialogs.import_dialog import ImportDialog

    from ..core import torch_builders as builders

    source = builders.save_torchscript(builders.bn_net(), tmp_path / "net.pt")
    errors = []
    window.errorShown.connect(errors.append)
    window.import_source(source)
    qtbot.waitUntil(lambda: window.findChild(ImportDialog) is not None, timeout=300_000)
    dialog = window.findChild(ImportDialog)
    dialog.inputs_table.setRowCount(0)  # a TorchScript file does not say its inputs: the user types them
    dialog.add_input_row(InputSpec("image", "float32", ("batch", 1, 6, 6)))
    dialog.out_edit.setText(str(tmp_path / "net.onnx"))
    qtbot.waitUntil(lambda: window.job is None, timeout=300_000)  # generous: a loaded CI machine
    dialog.accept()
    qtbot.waitUntil(lambda: bool(errors) or window.session is not None, timeout=300_000)
    assert not errors
    assert (tmp_path / "net.onnx").exists()
    assert window.session.model_path == tmp_path / "net.onnx"
    assert window.model.checked_outputs()


@pytest.mark.torch
def test_import_dialog_without_training_environment_says_why(qtbot, tmp_path, monkeypatch):
    """No training environment: "Generate training artifacts" is off, greyed, and says how to get one."""
    pytest.importorskip("torch")
    from onnxport.core.pytorch.sources import describe_source
    from onnxport.core.training.environment import ENV_VARIABLE
    from onnxport.gui.dialogs.import_dialog import ImportDialog

    from ..core import torch_builders as builders

    source = builders.save_torchscript(builders.bn_net(), tmp_path / "net.pt")
    info = describe_source(source, trust_code=True)
    monkeypatch.setenv(ENV_VARIABLE, str(tmp_path / "no-python"))
    dialog = ImportDialog(info, trust_code=True)
    qtbot.addWidget(dialog)
    dialog.training_radio.setChecked(True)
    assert dialog.training_box.isEnabled()
    assert not dialog.artifacts_check.isChecked() and not dialog.artifacts_check.isEnabled()
    assert "make training-env" in dialog.artifacts_check.toolTip()
    monkeypatch.delenv(ENV_VARIABLE)
    if (Path(sys.prefix).parent / ".venv-training" / "bin" / "python").exists():
        available = ImportDialog(info, trust_code=True)
        qtbot.addWidget(available)
        available.training_radio.setChecked(True)
        assert available.artifacts_check.isChecked() and available.artifacts_check.isEnabled()



def test_an_int4_export_writes_matmulnbits_beside_the_float_model(qtbot, window, tmp_path):
    """The CLI's `--mode int4` from the app: a forward model with two 32k-value MatMul weights."""
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((128, 256)) / 11).astype(np.float32), (rng.standard_normal((256, 128)) / 16).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="/fc1/MatMul"),
             helper.make_node("Relu", ["h"], ["a"], name="/act/Relu"),
             helper.make_node("MatMul", ["a", "w2"], ["y"], name="/fc2/MatMul")]
    graph = helper.make_graph(nodes, "int4", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 128])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 128])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    source = tmp_path / "forward.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), source)
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths([source])
    out = tmp_path / "model.onnx"
    errors = []
    window.errorShown.connect(errors.append)
    window.start_export(ExportChoices(out, quantize="int4", validate=True))
    qtbot.waitUntil(lambda: window.job is None and (window.last_quantized is not None or errors), timeout=300_000)
    assert not errors and window.last_quantized == tmp_path / "model.int4.onnx"
    assert "MatMulNBits" in {n.op_type for n in onnx.load(window.last_quantized).graph.node}
