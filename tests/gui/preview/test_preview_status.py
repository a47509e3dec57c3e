"""The preview's status line follows the selection: its size is the new preview's, and while the
new one is built it does not show the old size (issue 15, cut 12)."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.export.drawing import draw_selection
from onnxport.core.util.text import human_size

from ...core.model_builders import eval_like_mlp, session_for
from .test_netron_preview import WEIGHTS, panel  # noqa: F401 - the fixture

pytestmark = pytest.mark.gui


def test_status_shows_the_size_of_the_new_selection(qtbot, panel, tmp_path):  # noqa: F811
    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(d_hidden=64), path)
    session = session_for(path, WEIGHTS)
    sizes = {}
    for outputs in (["logits"], ["hidden"]):
        sizes[outputs[0]] = human_size(len(draw_selection(session.selections, outputs).data))
    assert sizes["logits"] != sizes["hidden"]
    with qtbot.waitSignal(panel.rendered, timeout=300_000):
        panel.set_model(session, ["logits"])
    assert sizes["logits"] in panel.status.text()
    panel.set_model(session, ["hidden"])
    assert sizes["logits"] not in panel.status.text()  # not the old size while the new one is built
    qtbot.waitUntil(lambda: sizes["hidden"] in panel.status.text(), timeout=300_000)
