"""The main window's left side: a drop hint until a model is open, then the outputs tree with its
filter, "graph outputs only", "allow training-only" and the list of checked outputs.

The pane only shows; the window owns the tree model and rebuilds it (in a side job) when
`filterChanged` says the filter changed (debounced while the user types).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from .plain_text import plain_label, plain_tip
from .tree_model import OUTPUTS_GROUP, OutputsTreeModel
from .window_keys_edit import WindowKeysEdit

FILTER_DEBOUNCE_MS = 200
COLUMN_WIDTHS = (190, 110, 65, 90)  # Name (short under its scope), Shape, Type, Op
INDENTATION = 14  # px per level (Qt's 20 left a name 4 scopes deep half its column)
EXPAND_ALL_UP_TO = 2000  # a filtered tree this small is shown fully expanded
EMPTY_HINT = ("<h2>Drop an eval model and its checkpoint here</h2>"
              "<p>…or use <b>File &gt; Open</b> (Ctrl+O). onnxport works out which file is the model<br>"
              "and which holds the trained parameters. Any ONNX model works too.</p>")  # the preview shows it
NOTHING_OPEN = "The tensors of the model you open are listed here: check the outputs to keep."


class OutputsPane(QStackedWidget):
    filterChanged = Signal()  # noqa: N815 - Qt naming; the filter text (debounced) or "outputs only" changed

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._filter_timer = QTimer(self, singleShot=True, interval=FILTER_DEBOUNCE_MS,
                                    timeout=self.filterChanged.emit)
        self.filter_edit = WindowKeysEdit(placeholderText="Filter tensors by name…", clearButtonEnabled=True)
        self.filter_edit.textChanged.connect(lambda _: self._filter_timer.start())
        self.outputs_only = QCheckBox("Graph outputs only")
        self.outputs_only.toggled.connect(lambda _: self.filterChanged.emit())
        self.allow_training = QCheckBox("Allow training-only")
        self.allow_training.setToolTip("Let loss and label tensors be checked (they are rarely wanted)")
        filters = QHBoxLayout()  # under the filter box: the pane stays narrow, the graph gets the room
        filters.addWidget(self.outputs_only)
        filters.addWidget(self.allow_training)
        filters.addStretch(1)
        self.tree = QTreeView(uniformRowHeights=True, alternatingRowColors=True)
        self.tree.setObjectName("outputsTree")
        self.tree.setIndentation(INDENTATION)
        self.tree.expanded.connect(self._span_child_groups)
        self.checked_label = plain_label()  # tensor names: text, never markup (plain_text.py)
        self.checked_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # never widens the pane
        tree_box = QWidget()
        tree_layout = QVBoxLayout(tree_box)
        tree_layout.setContentsMargins(0, 0, 0, 0)
        tree_layout.addWidget(self.filter_edit)
        tree_layout.addLayout(filters)
        tree_layout.addWidget(self.tree, 1)
        tree_layout.addWidget(self.checked_label)
        self.empty = QLabel(NOTHING_OPEN, alignment=Qt.AlignCenter, wordWrap=True)
        self.empty.setObjectName("emptyHint")
        self.addWidget(self.empty)
        self.addWidget(tree_box)

    def wanted_filter(self) -> tuple[str, bool]:
        """(text, graph outputs only) as the user set them."""
        return self.filter_edit.text(), self.outputs_only.isChecked()

    def show_model(self, model: OutputsTreeModel) -> None:
        """Show `model` in the tree (the caller deletes the one it replaces) with "Outputs" open."""
        self.tree.setModel(model)
        for column, width in enumerate(COLUMN_WIDTHS):  # name and shape in view in the pane's width
            self.tree.setColumnWidth(column, width)
        self.expand_outputs()
        self.setCurrentIndex(1)

    def show_filtered(self) -> None:
        """After the model's filter changed: a small filtered tree fully open, else "Outputs" open."""
        model = self.tree.model()
        if model.filter()[0] and model.visible_tensor_count() <= EXPAND_ALL_UP_TO:
            self.expand_outputs()
            self.tree.expandAll()  # emits no `expanded`: span every group (a small tree)
            for index in model.group_indexes(depth=1 << 10):
                self.tree.setFirstColumnSpanned(index.row(), index.parent(), True)
        else:
            self.expand_outputs()

    def expand_outputs(self) -> None:
        model = self.tree.model()
        for index in model.group_indexes(depth=1):
            self.tree.setFirstColumnSpanned(index.row(), index.parent(), True)  # a group's label is never cut
            if model.node(index).label == OUTPUTS_GROUP:
                self.tree.expand(index)

    def _span_child_groups(self, parent) -> None:
        """A group just opened: its sub-groups' labels span the row (never cut by the Shape column).
        A group's tensors come before its sub-groups, so this looks at the sub-groups only."""
        model = self.tree.model()
        for row in range(model.rowCount(parent) - 1, -1, -1):
            if model.info(model.index(row, 0, parent)) is not None:
                break
            self.tree.setFirstColumnSpanned(row, parent, True)

    def show_checked(self, outputs: list[str]) -> None:
        self.checked_label.setText(f"{len(outputs)} output(s) checked: " + ", ".join(outputs[:8])
                                   + (" …" if len(outputs) > 8 else ""))
        self.checked_label.setToolTip(plain_tip("\n".join(outputs)))  # the pane may cut the line
