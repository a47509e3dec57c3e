"""What the benches observe, the window and the preview say through signals and queries, not
through attributes kept for them: `treeShown`, `settled()`, `drawnAfter`."""

from __future__ import annotations

import onnx
import pytest

from ..core.graph.test_focus import layered_model
from ..core.model_builders import session_for
from .preview.test_focused_preview import panel  # noqa: F401 - the fixture
from .test_main_window import open_example

pytestmark = pytest.mark.gui


def test_an_open_says_how_long_the_tree_took_and_a_selection_settles(qtbot, window, example):
    shown: list[float] = []
    window.treeShown.connect(shown.append)
    open_example(qtbot, window, example)
    assert len(shown) == 1 and 0 <= shown[0] < 60
    qtbot.waitUntil(window.settled, timeout=300_000)
    window.model.set_checked("probabilities", False)
    assert not window.settled()  # the plan waits for its debounce
    qtbot.waitUntil(window.settled, timeout=300_000)
    assert not any(hasattr(window, name) for name in ("last_tree_seconds", "bench_loaded"))


def test_the_preview_says_how_long_a_drawing_took_after_its_change(qtbot, panel, tmp_path):  # noqa: F811
    path = tmp_path / "layered.onnx"
    onnx.save(layered_model(2), path)
    times: list[float] = []
    panel.drawnAfter.connect(times.append)
    with qtbot.waitSignal(panel.rendered, timeout=300_000):
        panel.set_model(session_for(path), ["logits"])
    assert len(times) == 1 and 0 < times[0] < 60
    assert not any(hasattr(panel, name) for name in ("render_seconds", "reuse_page"))
