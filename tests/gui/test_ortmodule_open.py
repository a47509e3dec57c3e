"""The window opens what ORTModule users hold: the folder of graphs it saved + a PyTorch state_dict."""

from __future__ import annotations

import pytest

from onnxport.gui.dialogs.export_dialog import ExportChoices

from .test_main_window import drop, error_boxes

pytestmark = [pytest.mark.gui, pytest.mark.torch]


def test_drop_an_ortmodule_folder_and_a_state_dict_then_export(qtbot, window, tmp_path):
    pytest.importorskip("torch")
    from ..core.ortmodule_builders import OUTPUT, bn_net, ortmodule_folder, run_both, save_state_dict

    module = bn_net()
    folder = ortmodule_folder(module, tmp_path / "ortmodule_onnx")
    state = save_state_dict(module, tmp_path / "state.pt", "module.")  # saved from a DDP job
    errors: list[str] = []
    window.errorShown.connect(errors.append)
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        drop(window, [state, folder])
    assert not errors and not error_boxes()

    # the graph PyTorch exported, not ORT's execution model; its outputs in the tree, checked
    assert window.session.model_path.name == "net_torch_exported_inference.onnx"
    assert window.model.checked_outputs() == [OUTPUT]
    panel = window.sources_panel.text()
    assert "ORTModule graphs 'net': 7 saved, using torch_exported_inference" in panel
    assert "fitted to the model: &#x27;module.&#x27; replaced by &#x27;_original_module.&#x27;" in panel
    assert "8 parameters match the model" in panel and "Missing" not in panel
    assert "Not used by the model: module.bn.num_batches_tracked" in panel
    assert "decoy" not in panel and "Not used here" not in panel  # the other graphs are not "unused files"
    assert "parameter names fitted to the model" in window.log.toPlainText()
    qtbot.waitUntil(lambda: "8 parameters kept" in window.plan_panel.text(), timeout=300_000)

    out = tmp_path / "out" / "model.onnx"
    out.parent.mkdir()
    with qtbot.waitSignal(window.exportFinished, timeout=300_000) as blocker:
        window.start_export(ExportChoices(out, validate=True))
    export, post = blocker.args[0]
    assert export.path == out and export.outputs == [OUTPUT]
    assert post.passed is True
    assert run_both(module, out) <= 1e-5
    assert not errors
