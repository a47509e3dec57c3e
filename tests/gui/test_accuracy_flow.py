"""The real flow: export + quantize in the window, the error map painted on the preview, the worst
node kept in float from the report, quantized again, and the page shows the new colours.

The int8 path is pinned (7-bit weights, what ORT's kernels compute exactly on every CPU) so no
colour depends on the machine's CPU.
"""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

from onnxport.gui.dialogs.export_dialog import ExportChoices

from .preview.test_error_overlay import page_state, rgb
from .test_main_window_flows import sizeable_example  # noqa: F401 - fixture

pytestmark = pytest.mark.gui


@pytest.fixture
def avx2(monkeypatch):
    from onnxport.core.quantize import cpu_int8

    monkeypatch.setattr(cpu_int8, "detect", lambda: cpu_int8.PATHS["avx2"])


def painted_page(qtbot, window) -> tuple[dict, dict]:
    payload = window.error_overlay.payload
    shown = {n for n in payload["nodes"] if n in drawn_names(qtbot, window)}
    return {n: payload["nodes"][n]["fill"] for n in shown}, page_state(qtbot, window.preview.view, sorted(shown))


def drawn_names(qtbot, window) -> set[str]:
    with qtbot.waitCallback(timeout=300_000) as got:
        window.preview.view.run("JSON.stringify(Array.from(document.querySelectorAll('g.graph-node'))"
                                ".map((g) => g.id.replace(/^node-name-/, '')))", got)
    return set(json.loads(got.args[0]))


def test_keep_in_float_from_the_report_repaints_the_graph(qtbot, window, sizeable_example, tmp_path, avx2):  # noqa: F811
    overlay = window.error_overlay
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths(sizeable_example)
    window.tabs.setCurrentWidget(window.preview)  # Netron draws when its page is shown
    assert window.preview.wait_rendered(300) > 0
    with qtbot.waitSignal(overlay.painted, timeout=300_000, check_params_cb=lambda n: n > 0):
        window.start_export(ExportChoices(tmp_path / "model.onnx", quantize="dynamic", validate=True))
    qtbot.waitUntil(lambda: window.job is None, timeout=300_000)
    before, state = painted_page(qtbot, window)
    assert before and state["painted"] == len(before) == overlay.last_painted
    assert all(state["fills"][n] == rgb(fill) for n, fill in before.items())
    assert "Error each node adds" in state["legend"]

    nodes = window.report_view.nodes
    worst = nodes.item(0).data(Qt.ItemDataRole.UserRole)  # the node adding the most error
    old_added = next(e["added"] for e in window.report_view.report["quantize"]["validation"]["tensors"]["nodes"]
                     if e["node"] == worst)
    old_layers = window.report_view.report["quantize"]["validation"]["layers"]
    nodes.item(0).setCheckState(Qt.CheckState.Checked)
    with qtbot.waitSignal(overlay.painted, timeout=300_000):
        window.report_view.requantize_button.click()  # "Keep checked nodes in float and quantize again"
    qtbot.waitUntil(lambda: window.job is None, timeout=300_000)
    from onnxport.core.quantize.quantize import quantize_info

    group = next(e["group"] for e in old_layers if e["node"] == worst)  # e.g. the MatMul fused ahead of an Add
    kept = quantize_info(window.last_quantized)["excluded_nodes"]
    assert any(k == g or k.startswith(g + "/") for k in kept for g in group)  # ORT renames fused nodes n/<Fusion>
    new_map = window.report_view.report["quantize"]["validation"]["tensors"]
    new_added = next((e["added"] for e in new_map["nodes"] if e["node"] == worst), 0.0)
    assert new_added < old_added / 2  # kept in float, it adds (almost) nothing of its own
    after, state = painted_page(qtbot, window)
    assert after != before
    assert state["painted"] == len(after) and all(state["fills"][n] == rgb(fill) for n, fill in after.items())
    assert worst not in after or after[worst] != before[worst]
