"""The Netron preview, for real: WebEngine offscreen, Netron's own page, our loopback server."""

from __future__ import annotations

import datetime

import onnx
import pytest

from onnxport.gui.preview.netron_server import AGE_CHECK, NETRON_DIR, PreviewServer, patched_browser_js

from ...core.model_builders import eval_like_mlp, mlp_weights, selection_preview, session_for

pytestmark = pytest.mark.gui
WEIGHTS = mlp_weights()


@pytest.fixture
def eval_model(tmp_path):
    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    return path


@pytest.fixture
def panel(qtbot):
    from onnxport.gui.preview.preview_panel import PreviewPanel

    widget = PreviewPanel()
    qtbot.addWidget(widget)
    widget.resize(900, 700)
    widget.show()
    yield widget
    widget.shutdown()


def expected_nodes(path, outputs) -> int:
    return len(selection_preview(onnx.load(path), outputs, WEIGHTS).graph.node)


def show(qtbot, panel, path, outputs) -> int:
    with qtbot.waitSignal(panel.rendered, timeout=300_000) as drawn:
        panel.set_model(session_for(path, WEIGHTS), outputs)
    return drawn.args[0]


def test_netron_draws_the_pruned_graph_and_follows_the_selection(qtbot, panel, eval_model):
    drawn = show(qtbot, panel, eval_model, ["logits"])
    assert drawn == expected_nodes(eval_model, ["logits"]) == 5  # 2 x (MatMul, Add) + Relu: as written, folded
    drawn = show(qtbot, panel, eval_model, ["hidden"])
    assert drawn == expected_nodes(eval_model, ["hidden"]) == 3
    with qtbot.waitSignal(panel.rendered, timeout=300_000) as original:
        panel.set_mode("original")
    assert original.args[0] == len(onnx.load(eval_model).graph.node)
    assert panel.reloads == 1  # later models open in the running page, no reload
    # nothing left the machine: every request the page made went to our loopback server
    interceptor = panel.view.interceptor
    assert interceptor.allowed and all("127.0.0.1" in u for u in interceptor.allowed if u.startswith("http"))
    assert "/data/" in " ".join(panel.server.requests)


def test_outside_requests_are_blocked(qtbot, panel, eval_model):
    show(qtbot, panel, eval_model, ["logits"])
    panel.view.run("fetch('https://example.com/x').catch(() => null); 1")
    qtbot.waitUntil(lambda: any("example.com" in u for u in panel.view.interceptor.blocked), timeout=300_000)
    assert not any("example.com" in u for u in panel.view.interceptor.allowed)


def test_focus_selects_the_producing_node(qtbot, panel, eval_model):
    panel.set_model(session_for(eval_model, WEIGHTS), ["logits"], producer_of={"fc1.mm": "/fc1/MatMul"}.get)
    assert panel.wait_rendered(300) == 5
    with qtbot.waitCallback(timeout=300_000) as found:
        panel.view.focus("/fc1/MatMul", found)
    assert found.args[0] is True
    with qtbot.waitCallback(timeout=300_000) as missing:
        panel.view.focus("/not/a/node", missing)
    assert missing.args[0] is False


def test_a_warmed_up_page_opens_the_first_preview_in_place(qtbot, panel, eval_model):
    """`warm_up` starts Netron with no model; the first preview then opens in that page."""
    panel.warm_up()
    qtbot.waitUntil(lambda: panel._page_ready, timeout=300_000)
    assert panel.reloads == 1 and not any(r.startswith("/data/") for r in panel.server.requests)
    assert show(qtbot, panel, eval_model, ["logits"]) == 5
    assert panel.reloads == 1  # no second page load


def test_a_preview_ready_before_the_page_opens_once_it_is(qtbot, panel, eval_model):
    from onnxport.core.export.drawing import draw_selection

    panel.warm_up()
    session = session_for(eval_model, WEIGHTS)
    panel.set_model(session, ["hidden"])
    panel._debounce.stop()  # published here, at once: certainly while the page is starting
    panel._generation += 1
    with qtbot.waitSignal(panel.rendered, timeout=300_000) as drawn:
        panel._publish(panel._generation, draw_selection(session.selections, ["hidden"]), session, True)
        assert panel._warming
    assert drawn.args[0] == 3
    assert panel.reloads == 1


def test_the_window_warms_the_preview_up_once_shown(qtbot, window):
    assert window.tabs.currentWidget() is not window.preview  # even on a tab nobody sees
    qtbot.waitUntil(lambda: window.preview._page_ready, timeout=300_000)
    assert window.preview.reloads == 1


class PanelClock:
    """The preview panel's `time`, moved by the test: its render timeout is judged on this clock,
    so "long past the timeout" is a jump, not a wait; `reads` counts the panel's looks at it."""

    def __init__(self) -> None:
        self.now, self.reads = 1000.0, 0

    def perf_counter(self) -> float:
        self.reads += 1
        return self.now

    @staticmethod
    def sleep(seconds: float) -> None:
        raise AssertionError("the panel slept")


def test_a_preview_nobody_sees_waits_instead_of_failing(qtbot, panel, eval_model, monkeypatch):
    """Chromium lays out no hidden page: the render timeout runs only while the preview is seen."""
    from onnxport.gui.preview import preview_panel

    clock = PanelClock()
    monkeypatch.setattr(preview_panel, "time", clock)
    failures = []
    panel.failed.connect(failures.append)
    panel.hide()
    panel.set_model(session_for(eval_model, WEIGHTS), ["logits"])
    qtbot.waitUntil(lambda: panel._poll.isActive(), timeout=300_000)
    clock.now += 10 * preview_panel.RENDER_TIMEOUT_S  # long past the timeout, as far as the panel knows
    seen = clock.reads
    qtbot.waitUntil(lambda: clock.reads >= seen + 3, timeout=300_000)  # the poll looked at the clock again
    assert not failures and panel._poll.isActive()
    with qtbot.waitSignal(panel.rendered, timeout=300_000) as drawn:  # the panel's clock stands still: no 60 s bound of its own
        panel.show()
    assert drawn.args[0] == 5 and not failures


def test_an_aged_build_date_does_not_lock_the_page(qtbot, eval_model):
    """Serve Netron with a build date years old: its own check would loop on 'Please update'."""
    from onnxport.gui.preview.preview_panel import PreviewPanel

    assert AGE_CHECK in (NETRON_DIR / "browser.js").read_text(encoding="utf-8")  # the check we defuse exists
    assert AGE_CHECK not in patched_browser_js((NETRON_DIR / "browser.js").read_text(encoding="utf-8"))
    panel = PreviewPanel()
    qtbot.addWidget(panel)
    panel.server.stop()
    panel.server = PreviewServer(build_date=datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc))
    panel.view.origin = panel.server.origin
    panel.show()
    try:
        assert show(qtbot, panel, eval_model, ["logits"]) == 5
        with qtbot.waitCallback(timeout=300_000) as text:
            panel.view.run("document.body.innerText", text)
        assert "Please update" not in (text.args[0] or "")
    finally:
        panel.shutdown()


def test_the_main_window_previews_what_is_checked(qtbot, window, example):
    window.tabs.setCurrentWidget(window.preview)  # Chromium does not lay out pages nobody sees
    with qtbot.waitSignal(window.loaded, timeout=300_000):
        window.open_paths(example)
    assert window.preview.wait_rendered(300) == len(
        window.session.selection(["logits", "probabilities"]).preview.graph.node)
    relu = window.model.index_of("/Relu_output_0")
    window.model.set_checked("logits", False)
    window.model.set_checked("probabilities", False)
    with qtbot.waitSignal(window.preview.rendered, timeout=300_000) as drawn:
        window.model.set_checked(window.model.info(relu).name, True)
    assert drawn.args[0] == 2  # Gemm + Relu



def test_without_webengine_the_panel_says_why_and_offers_the_browser(qtbot, monkeypatch, eval_model):
    import sys

    from onnxport.gui.preview.preview_panel import PreviewPanel

    monkeypatch.setitem(sys.modules, "onnxport.gui.preview.netron_view", None)  # import fails as if not installed
    panel = PreviewPanel()
    qtbot.addWidget(panel)
    try:
        assert panel.view is None and "cannot start" in panel.unavailable.text()
        assert panel.browser_button.isEnabled()
        panel.set_model(session_for(eval_model, WEIGHTS), ["logits"])
        assert panel.wait_rendered(300) == 0  # published, nothing to draw here
        assert panel.last_url.startswith("http://127.0.0.1:")
    finally:
        panel.shutdown()
