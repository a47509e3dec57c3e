"""The "Start here" menu: cut the graph at a tensor, from the tree or from a node of the graph.

`cut_menu(parent, tensors, starts, set_starts)` lists, for each of `tensors` (a tensor of the
tree, or the outputs of a node right-clicked in the graph), "Start here at T" (T becomes an input
of the export: the graph above it is cut off) or, for one already a start, "Do not start at T";
and "Start from the model's inputs again" while any start is set. `set_starts(new tuple)` is
called with the chosen starts. `StartHere` holds the window's starts and offers the menu on the
tree (a tensor) and on the graph (a node's outputs); a change redraws and replans at once. On a
node of the graph the menu also lists its weights ("Weight W: numbers and histogram"): `show_weight(W)`
shows that weight's numbers as selecting it in the tree does (weight_panel.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMenu, QTreeView, QWidget

from onnxport.core.graph.tensor_info import TensorKind


def cut_menu(parent: QWidget, tensors: Sequence[str], starts: Sequence[str],
             set_starts: Callable[[tuple[str, ...]], None], weights: Sequence[str] = (),
             show_weight: Callable[[str], None] | None = None) -> QMenu:
    """See the module docstring."""
    menu = QMenu(parent)
    for name in weights if show_weight is not None else ():
        menu.addAction(f"Weight {name}: numbers and histogram").triggered.connect(
            lambda _=False, n=name: show_weight(n))
    if menu.actions():
        menu.addSeparator()
    for name in tensors:
        if name in starts:
            action = menu.addAction(f"Do not start at {name}")
            action.triggered.connect(lambda _=False, n=name: set_starts(tuple(s for s in starts if s != n)))
        else:
            action = menu.addAction(f"Start here at {name}")
            action.setToolTip("Make this tensor an input of the export: the graph above it is cut off")
            action.triggered.connect(lambda _=False, n=name: set_starts((*starts, n)))
    if starts:
        menu.addSeparator()
        menu.addAction("Start from the model's inputs again").triggered.connect(lambda _=False: set_starts(()))
    return menu


class StartHere:
    """The tensors the window's export starts from (none: the model's inputs), and their menus."""

    def __init__(self, window: QWidget, changed: Callable[[], None], tree: QTreeView, preview: QWidget) -> None:
        """`changed()` when the starts change; the menu on `tree`'s tensors and `preview`'s nodes
        (its `nodeMenu`, if it draws)."""
        self.window, self.changed, self.tree = window, changed, tree
        self.starts: tuple[str, ...] = ()
        tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        tree.customContextMenuRequested.connect(lambda pos: self.tree_menu(tree, pos))
        if hasattr(preview, "nodeMenu"):
            preview.nodeMenu.connect(lambda node, at: self.node_menu(self.window.session, node, at))

    def tree_menu(self, tree: QTreeView, pos) -> None:
        """A tensor right-clicked in the tree (a weight cannot be a start)."""
        model = tree.model()
        info = model.info(tree.indexAt(pos)) if hasattr(model, "info") else None
        if info is not None and info.kind != TensorKind.PARAMETER:
            cut_menu(self.window, [info.name], self.starts, self.set_starts).popup(tree.viewport().mapToGlobal(pos))

    def node_menu(self, session, node: str, global_pos) -> None:
        """A node right-clicked in the graph: "Start here" at its outputs, and its weights."""
        table = session.table if session is not None else None
        if table is None or node not in table.names:  # a placeholder of the focused view
            return
        at = table.names.index(node)
        outputs = [o for o in table.outputs[at] if o]
        tensors = session.index.tensors if session.index is not None else {}
        weights = [n for n in dict.fromkeys(table.uses[at])
                   if getattr(tensors.get(n), "kind", None) == TensorKind.PARAMETER]
        cut_menu(self.window, outputs, self.starts, self.set_starts, weights, self.show_weight).popup(global_pos)

    def show_weight(self, name: str) -> None:
        """A weight chosen on the graph (its node's menu): selected in the tree, its numbers shown in
        the window's Overview tab (in the tree or not: a filter may hide it)."""
        window = self.window
        window.tabs.setCurrentWidget(window.overview)
        index = window.model.index_of(name) if window.model is not None else None
        if index is not None and index.isValid():
            self.tree.scrollTo(index)
            self.tree.setCurrentIndex(index)  # the window follows the tree's current tensor
        elif window.session is not None and window.session.index is not None:
            window.overview.show_tensor(window.session.index.tensors.get(name), window.runner, window.session)

    def set_starts(self, starts: tuple[str, ...]) -> None:
        self.starts = tuple(starts)
        log = getattr(self.window, "log_line", None)
        if log is not None:
            log(f"the export starts at {', '.join(starts)} (a model cut there is exported without validation: "
                "its reference has no such inputs)" if starts else "the export starts from the model's inputs")
        self.changed()
