"""The app's "Run on": the dialog lists the providers found, the run's report reaches the Report
tab, and the real Netron page is painted by provider (the Hardmax OpenVINO does not take in
orange, the nodes it took in blue), read back from the page."""

from __future__ import annotations

import json

import pytest

from onnxport.core.runtimes.discovery import Runtime
from onnxport.gui.dialogs.run_on_dialog import choices, parse_options
from onnxport.gui.preview.provider_overlay import ON_CPU, ON_PROVIDER, provider_payload

from ...core.runtimes.runtime_models import OPENVINO, mixed_model, openvino_python
from ..preview.test_error_overlay import page_state, rgb

pytestmark = pytest.mark.gui


def test_choices_list_each_provider_but_cpu_and_options_are_key_value():
    runtimes = [Runtime("/a/python", "this environment", "1.32.0", "onnxruntime",
                        ["AzureExecutionProvider", "CPUExecutionProvider"]),
                Runtime("/b/python", "make target", "1.24.1", "onnxruntime-openvino", [OPENVINO, "CPUExecutionProvider"])]
    assert choices(runtimes) == [("openvino: onnxruntime-openvino 1.24.1 (/b/python)", OPENVINO)]
    assert parse_options(" precision=ACCURACY, device_type=CPU ,") == {"precision": "ACCURACY", "device_type": "CPU"}
    with pytest.raises(ValueError, match="'FP16' is not KEY=VALUE"):
        parse_options("FP16")


def test_a_failed_provider_paints_nothing():
    report = {"providers": [{"provider": "CPUExecutionProvider"}, {"provider": OPENVINO, "error": "did not start"}],
              "providers_run": {"node_names": ["a"]}}
    assert provider_payload(report) == {"nodes": {}, "legend": None}


@pytest.fixture
def mixed(tmp_path):
    openvino_python()
    return mixed_model(tmp_path / "mixed.onnx")


def test_run_on_openvino_from_the_window_paints_the_graph_by_provider(qtbot, window, mixed):
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths([mixed])
    assert window.run_on_action.isEnabled()
    window.run_on_action.trigger()
    dialog = window.run_on_flow.dialog
    qtbot.waitUntil(dialog.provider.isEnabled, timeout=300_000)  # the runtimes are described
    dialog.provider.setCurrentIndex(dialog.provider.findData(OPENVINO))
    dialog.options.setText("device_type=CPU")
    with qtbot.waitSignal(window.run_on_flow.shown, timeout=300_000) as shown:
        dialog.accept()
    report = shown.args[0]
    ov = report["providers"][1]
    assert ov["provider"] == OPENVINO and ov["cpu_nodes"] == ["hm"] and ov["options"] == {"device_type": "CPU"}
    qtbot.waitUntil(lambda: window.report_view.report is report, timeout=300_000)
    details = window.report_view.details.text()
    assert "4 of 5 nodes, 1 fell back to CPU" in details and "against CPU" in details
    qtbot.waitUntil(lambda: "hm" in window.error_overlay.payload["nodes"], timeout=300_000)  # built in a turn of its own
    payload = window.error_overlay.payload
    assert payload["nodes"]["hm"]["fill"] == ON_CPU and payload["nodes"]["mm"]["fill"] == ON_PROVIDER
    preview = window.preview
    qtbot.waitUntil(lambda: getattr(preview, "last_node_count", 0) > 0, timeout=300_000)  # the graph drawn
    qtbot.waitUntil(lambda: window.error_overlay.last_painted == 5, timeout=300_000)
    state = page_state(qtbot, preview.view, ["hm", "mm", "sig"])
    assert state["fills"] == {"hm": rgb(ON_CPU), "mm": rgb(ON_PROVIDER), "sig": rgb(ON_PROVIDER)}
    assert "1 fell back to CPU" in state["legend"] and "5 nodes painted" in state["legend"]
    assert json.dumps(report)  # the report stays JSON
