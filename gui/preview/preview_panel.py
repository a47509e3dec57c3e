"""The Preview, in the middle of the window: the graph the export will write, drawn by Netron.

`set_model(session, outputs)` is debounced; the drawing (core/export/drawing.py: the
selection's export graph from the session, without weights) is made in a side job (newest answer
only), published on the loopback server (netron_server.py) and opened in the running Netron page. `warm_up()` loads the page with no model while the app idles. After each
open the panel polls until Netron has drawn (`rendered(node_count)`) and re-focuses the tensor the
user had selected. "Pruned"/"Original": the export's graph, or the whole one with what the export
drops dimmed (kept_marks.py). A graph Netron would draw more than `WHOLE_UP_TO` nodes of is drawn
focused (core/graph/focus.py): the neighbourhood of the selection, repeated layers collapsed, cut
at the budget; the status line says what is shown, "Show more" doubles the budget, and a selected
tensor the focused view does not draw becomes the focus. Until the first preview the panel
shows the drop hint, not Netron's start page.
A drawing opens on its outputs; the bar's box finds nodes and tensors (graph_find.py). Without
WebEngine the panel says why and offers the same preview in the system browser.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from onnxport.core.export.drawing import WHOLE_UP_TO, Drawing, draw_selection, draw_whole, kept_node_names
from onnxport.core.graph.focus import FOCUS_BUDGET, FocusedPreview, FocusGraph
from onnxport.core.util.text import human_size

from ..dialogs.error_dialog import error_text
from ..dialogs.help_dialogs import open_or_say
from ..jobs.runner import JobRunner
from ..widgets.elided_label import ElidedLabel
from ..widgets.outputs_pane import EMPTY_HINT
from ..widgets.plain_text import plain_label
from .graph_find import CENTRE_OUTPUTS_JS, GraphSearch
from .kept_marks import MARK_JS
from .netron_server import PreviewServer

if TYPE_CHECKING:
    from onnxport.core.workflow.session import ModelSession

DEBOUNCE_MS = 250
POLL_MS = 50
RENDER_TIMEOUT_S = 60


class PreviewPanel(QWidget):
    rendered = Signal(int)  # node count Netron drew
    nodeMenu = Signal(str, QPoint)  # noqa: N815 - a drawn node right-clicked (NetronView.nodeMenu)
    drawnAfter = Signal(float)  # noqa: N815 - seconds from the last change of model to that drawing
    failed = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.server = PreviewServer()
        self.mode = "pruned"
        self._request: tuple[ModelSession, list[str], tuple[str, ...]] | None = None
        self._focus_tensor: str | None = None
        self._seed: str | None = None  # the tensor a focused preview is centred on (None: the outputs)
        self.whole_up_to = WHOLE_UP_TO  # a graph Netron draws more nodes of is drawn focused,
        self.initial_budget = FOCUS_BUDGET  # on this many drawn nodes at first
        self.budget = FOCUS_BUDGET  # the focused preview's budget now ("Show more" doubles it)
        self._graph: FocusGraph | None = None  # the whole graph read by the last focused Original view
        self._retired: list = []  # older previews' graph and result: let go in the next side job, not here
        self.focused: FocusedPreview | None = None  # what the drawn preview shows (None: the whole graph)
        self.kept_names: frozenset[str] | None = None  # original view: the nodes the export keeps (kept_marks.py)
        self._producer_of = lambda tensor: None
        self._generation = 0  # the model being shown: answers and page events of older ones are ignored
        self.jobs = JobRunner(self)
        self._poll_started = 0.0
        self.last_node_count = -1
        self.last_url = ""
        self._closed = False
        self.reloads = 0  # full page loads (the first one, or after a failed in-page reopen)
        self._page_ready = False  # Netron is running in the page: the next model opens in place
        self._marker: int | None = None  # the in-page open being waited for (None: a page load)
        self._warming = False  # the page is loading with no model (`warm_up`), not yet running Netron
        self.changed_at = 0.0  # when the last change of model arrived (`drawnAfter` counts from it)
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS, timeout=self._build)
        self._poll = QTimer(self, interval=POLL_MS, timeout=self._check_drawn)

        self.pruned_button = QPushButton("Pruned", checkable=True, checked=True)
        self.original_button = QPushButton("Original", checkable=True)
        group = QButtonGroup(self)
        group.addButton(self.pruned_button)
        group.addButton(self.original_button)
        self.pruned_button.toggled.connect(lambda on: on and self.set_mode("pruned"))
        self.original_button.toggled.connect(lambda on: on and self.set_mode("original"))
        self.browser_button = QPushButton("Open in browser", clicked=self.open_in_browser)
        self.open_url = QDesktopServices.openUrl  # the system's handler of web addresses
        self.more_button = QPushButton("Show more", clicked=self.show_more, visible=False)
        self.more_button.setToolTip("Draw twice as many nodes around the selection")
        self.status = ElidedLabel("Nothing to preview yet.")  # one line, plain text; all of it on hover
        bar = QHBoxLayout()
        for w in (self.pruned_button, self.original_button, self.browser_button):
            bar.addWidget(w)
        bar.addWidget(self.status, 1)
        bar.addWidget(self.more_button)
        self.search = GraphSearch(self)  # find a node or tensor in the drawing (graph_find.py)
        bar.addWidget(self.search.found)
        bar.addWidget(self.search.box)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        self.view = None
        try:
            from .netron_view import NetronView

            self.view = NetronView(self.server.origin, self)
            self.view.loadFinished.connect(self._loaded)
            self.view.nodeMenu.connect(self.nodeMenu)
            layout.addWidget(self.view, 1)
            self.view.hide()  # until the first preview: how to start, not Netron's own start page
            self.hint = QLabel(EMPTY_HINT, alignment=Qt.AlignmentFlag.AlignCenter, wordWrap=True)
            layout.addWidget(self.hint, 1)
        except Exception as exc:  # noqa: BLE001 - no WebEngine: say why, offer the browser
            self.unavailable = plain_label(f"The embedded preview cannot start ({error_text(exc)}).\n"
                                           "Use \"Open in browser\" to see the same preview.")
            self.unavailable.setAlignment(Qt.AlignCenter)
            self.unavailable.setWordWrap(True)
            layout.addWidget(self.unavailable, 1)

    # --- API for the main window ---------------------------------------------------------------
    def warm_up(self) -> None:
        """Start Netron's page with no model, if no page was loaded yet (see the module docstring)."""
        if self.view is None or self._closed or self.reloads or self._warming:
            return
        self._warming = True
        self.reloads += 1
        self.view.load(QUrl(self.server.page_url))

    def set_model(self, session: ModelSession, outputs: list[str], producer_of=None, starts=()) -> None:
        """Show `outputs` of the opened model `session`, cut at `starts` (debounced).
        `producer_of(tensor)`: the name of the node producing it, to focus tensors in the graph."""
        if self._request is None or self._request[0] is not session:  # another model: start afresh
            self._retired.append(self._graph)
            self.budget, self._graph = self.initial_budget, None
        self._request = (session, list(outputs), tuple(starts))
        self._seed = None  # new outputs: the focus goes back to them
        if producer_of is not None:
            self._producer_of = producer_of
        self.changed_at = time.perf_counter()
        self.status.setText("updating the preview…")  # never the previous selection's size meanwhile
        self._debounce.start()

    def set_mode(self, mode: str) -> None:
        if mode != self.mode:
            self.mode = mode
            (self.pruned_button if mode == "pruned" else self.original_button).setChecked(True)
            if self._request is not None:
                self.changed_at = time.perf_counter()
                self._build()

    def focus_node(self, tensor_name: str) -> None:
        """Select the node producing `tensor_name` in Netron; in a focused preview that does not
        draw it (cut off or collapsed) but would draw it whole, refocus on it (debounced)."""
        self._focus_tensor = tensor_name
        node = self._producer_of(tensor_name)
        focused = self.focused
        if node and focused is not None and node not in focused.shown_names and node in focused.cone_names:
            self._seed = tensor_name
            self.changed_at = time.perf_counter()
            self._debounce.start()
            return
        self._select(node)

    def show_more(self) -> None:
        """Redraw the focused preview with twice as many nodes."""
        if self._request is not None:
            self.budget *= 2
            self.changed_at = time.perf_counter()
            self._build()

    def _select(self, node: str | None) -> None:
        if node and self.view is not None and self.last_node_count > 0:
            self.view.focus(node)

    def open_in_browser(self) -> bool:
        """The preview in the system's browser; with none, a box says so and gives its address."""
        if not self.last_url:
            self.status.setText("nothing to preview yet: check an output")
            return False
        return open_or_say(self, QUrl(self.last_url), "Open in browser",
                           f"The preview's address, served by this app on this machine while it runs:\n{self.last_url}",
                           opener=self.open_url)

    def settled(self) -> bool:
        """No preview on its way: the current one is drawn, failed or was never asked for a page."""
        return (not self._debounce.isActive() and not self.jobs.side_jobs and not self._poll.isActive()
                and self.last_node_count >= 0)

    def wait_rendered(self, timeout: float = 30.0) -> int:
        """Block (processing events) until the current preview is drawn; its node count, -1 if not."""
        from PySide6.QtWidgets import QApplication

        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            if self.settled():
                return self.last_node_count
            QApplication.processEvents()
            time.sleep(0.01)
        return -1

    def shutdown(self) -> None:
        """Stop timers, release WebEngine (page before profile), stop the server."""
        if self._closed:
            return
        self._closed = True
        self._debounce.stop()
        self._poll.stop()
        self._generation += 1
        self.jobs.drop("preview")
        view, self.view = self.view, None
        if view is not None:
            view.release()
        self.server.stop()

    # --- internals -----------------------------------------------------------------------------
    def _build(self) -> None:
        if self._request is None:
            return
        session, outputs, starts = self._request
        pruned = self.mode == "pruned"
        self._generation += 1
        generation = self._generation
        self.last_node_count = -1
        self.status.setText("building the preview…")
        budget, seeds, graph, whole = self.budget, [self._seed] if self._seed else None, self._graph, self.whole_up_to
        retired, self._retired = self._retired, []

        def job(progress, cancel):
            retired.clear()  # a big graph's lists and sets take long to free: not on the GUI thread
            if pruned:
                return draw_selection(session.selections, outputs, budget, seeds, cancel, whole, starts)
            drawing = draw_whole(session.graph, session.table, session.params or (), budget, seeds, graph, cancel,
                                 whole)
            drawing.kept = kept_node_names(session.selections, outputs, whole, cancel, starts)
            return drawing

        self.jobs.side("preview", job,
                       lambda answer: self._publish(generation, answer, session, pruned),
                       lambda exc: self._failed(generation, error_text(exc)))

    def _publish(self, generation: int, answer: Drawing, session: ModelSession, pruned: bool) -> None:
        if generation != self._generation:
            return
        if not pruned and answer.graph is not None and self._request is not None and self._request[0] is session:
            if answer.graph is not self._graph:
                self._retired.append(self._graph)
            self._graph = answer.graph  # the whole graph read: handed back to the next Original drawing
        data, focused = answer.data, answer.focused
        self.kept_names = answer.kept  # the original view: what the export keeps
        self._retired.append(self.focused)
        self.focused = focused
        name = "pruned.onnx" if self.mode == "pruned" else "original.onnx"
        self.last_url = self.server.publish(data, name)
        size = human_size(len(data))
        shown = f": {focused.summary()}" if focused is not None and not focused.complete else ""
        self.status.setText(f"{self.mode} graph, {size} without weights{shown}")  # the short facts first
        self.more_button.setVisible(focused is not None and not focused.complete)
        if self.view is not None and self.view.isHidden():
            self.hint.hide()
            self.view.show()
        if self.view is None:
            self.last_node_count = 0
        elif self._warming:
            return  # the page is starting: `_warmed` opens this model in it
        elif self._page_ready:
            self.view.reopen(self.server.data_url, name, generation, lambda ok: self._reopened(generation, ok))
        else:
            self._load_page()

    def _load_page(self) -> None:
        self._warming = False
        self._marker = None
        self._page_ready = False
        self.reloads += 1
        self.view.load(QUrl(self.last_url))

    def _reopened(self, generation: int, ok: bool) -> None:
        if generation != self._generation or self.view is None:
            return
        if not ok:
            self._load_page()
            return
        self._marker = generation
        self._loaded(True)

    def _failed(self, generation: int, text: str) -> None:
        if generation == self._generation:
            self.last_node_count = 0
            self.status.setText(f"no preview: {text}")
            self.failed.emit(text)

    def _loaded(self, ok: bool) -> None:
        self._poll_started = time.perf_counter()
        self._poll.start()

    def _check_drawn(self) -> None:
        generation = self._generation
        if self.view is not None and not self._warming and not self.view.isVisible():
            self._poll_started = time.perf_counter()  # Chromium lays out no page nobody sees: no timeout
            return
        if time.perf_counter() - self._poll_started > RENDER_TIMEOUT_S:
            self._poll.stop()
            if self._warming:  # the next preview loads the page itself
                self._warming = False
            else:
                self._failed(generation, "Netron did not draw the graph")
            return
        if self.view is None:
            return
        if self._warming:
            self.view.ready(self._warmed)
        else:
            self.view.node_count(lambda n: self._counted(generation, n), self._marker)

    def _marked(self, generation: int, answer) -> None:
        if generation != self._generation:
            return
        try:
            counts = json.loads(answer) if isinstance(answer, str) and answer else None
        except ValueError:
            counts = None
        if isinstance(counts, list) and len(counts) == 2 and self.mode == "original":
            self.status.setText(f"{self.status.text()}; export keeps {counts[0]} nodes, drops {counts[1]} (dimmed)")

    def _warmed(self, ready: bool) -> None:
        """Netron runs in the warmed-up page: open the preview published meanwhile, if any."""
        if not ready or not self._warming or not self._poll.isActive():
            return
        self._poll.stop()
        self._warming = False
        self._page_ready = True
        if self.last_url and self._request is not None and not self.jobs.side_jobs:
            generation, name = self._generation, self.server.data_url.rsplit("/", 1)[-1]
            self.view.reopen(self.server.data_url, name, generation, lambda ok: self._reopened(generation, ok))

    def _counted(self, generation: int, count: int) -> None:
        if generation != self._generation or count == 0 or not self._poll.isActive():
            return
        self._poll.stop()
        if count < 0:  # the in-page open failed: load the page afresh (Netron says why, if it can)
            self._load_page()
            return
        self._page_ready = True
        self.last_node_count = count
        if self._focus_tensor:
            self._select(self._producer_of(self._focus_tensor))
        elif self.mode == "pruned" and self.view is not None:
            self.view.run(CENTRE_OUTPUTS_JS)  # open on the outputs chosen, not the inputs
        if self.mode == "original" and self.kept_names is not None and self.view is not None:
            self.view.run(MARK_JS % json.dumps(sorted(self.kept_names)), lambda a, g=generation: self._marked(g, a))
        self.drawnAfter.emit(time.perf_counter() - self.changed_at)
        self.rendered.emit(count)
