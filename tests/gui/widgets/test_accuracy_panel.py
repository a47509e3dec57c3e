"""The report's accuracy part: where the error jumps, a node picked on the graph, the before/after table."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.evaluate.benchmark import benchmark
from onnxport.core.evaluate.report import build_report
from onnxport.core.export.export import export_model
from onnxport.core.quantize.quantize import quantize

from ...core.model_builders import forward_mlp, mlp_weights

pytestmark = pytest.mark.gui


@pytest.fixture
def report(tmp_path):
    forward = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(mlp_weights(d_hidden=256)), forward)
    fp32 = tmp_path / "fp32.onnx"
    export_model(forward, fp32, ["logits"])
    result = quantize(fp32, tmp_path / "int8.onnx", "dynamic", int8_path="avx2", accuracy_target=None)
    bench = benchmark([fp32, result.path], seconds=0.05, min_runs=3, warmup=0)
    return build_report(export={"path": str(fp32)}, quantize=result, bench=bench)


def test_the_report_view_shows_the_diff_table_and_the_jump(qtbot, report):
    from onnxport.gui.widgets.report_view import ReportView

    view = ReportView()
    qtbot.addWidget(view)
    view.resize(700, 900)
    view.show()
    shown = []
    view.reportChanged.connect(shown.append)
    view.set_report(report)
    assert shown == [report]
    panel = view.accuracy
    rows = panel.diff.rows()
    assert len(rows) == len(report["diff"]["rows"]) and panel.diff.isVisible()
    by_name = {r[1]: r for r in rows}
    assert by_name["MatMulInteger"][2:4] == ["0", str(sum(n.op_type == "MatMulInteger" for n in
                                                        onnx.load(report["quantize"]["path"]).graph.node))]
    assert by_name["int8"][4] in ("new", "") or by_name["int8"][4].startswith("+")
    assert "p50 (ms)" in by_name and "logits (cosine)" in by_name
    assert "int8.onnx" in panel.diff_label.text()
    tensors = report["quantize"]["validation"]["tensors"]
    assert panel.jump.isVisible() and f"{tensors['tensors_compared']} tensors compared" in panel.jump.text()
    node = tensors["nodes"][0]
    panel.show_node(node["node"])
    assert node["node"] in panel.node_info.text() and "relative error" in panel.node_info.text()
    panel.show_node("/not/measured")
    assert "no measurable error" in panel.node_info.text()
    view.set_report(build_report(export={"path": report["export"]["path"]}))  # nothing to compare
    assert not panel.diff.isVisible() and not panel.jump.isVisible() and panel.diff.rowCount() == 0
