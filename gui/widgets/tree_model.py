"""The outputs tree: a thin QAbstractItemModel over gui/widgets/outputs_tree.py's plain tree (built
from a TensorIndex in the worker). The default outputs start checked.

Rows cost nothing until painted: a model index points at the group holding its row
(`internalPointer()` is the parent `TreeNode`, the row is `entries[row]`), so tensor rows need
no object of their own and a group's rows are only looked at when Qt asks for them (a collapsed
group of 50,000 tensors is never walked). A row's check state is read from the checked names
when it is painted, so rows first shown after a check (in a group expanded later) show it.

Checked names keep the order they were checked in: the export keeps outputs in that order.
Training-only tensors (loss, anything fed by labels) are shown grey and cannot be checked unless
`allow_training_only` is set, so nobody exports a loss by accident.
Filtering rebuilds the plain tree (no proxy model). Under its scope a row shows its short name,
shapes read `?` for unnamed dims (tensor_text.py); the tooltip has the whole name, as plain text.
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont

from onnxport.core.graph.index import TensorIndex, TensorInfo, TensorKind

from .outputs_tree import INPUTS_GROUP, OTHER_GROUP, OUTPUTS_GROUP, Tree, TreeNode, build_tree
from .plain_text import plain_tip
from .tensor_text import readable_shape, short_name

__all__ = ["INPUTS_GROUP", "OTHER_GROUP", "OUTPUTS_GROUP", "OutputsTreeModel", "Tree", "TreeNode", "build_tree"]

COLUMNS = ("Name", "Shape", "Type", "Op", "Kind")
GREY = QBrush(QColor("#8c8c8c"))
ItemIndex = QModelIndex | QPersistentModelIndex

# Qt asks `data()` for 7 roles of every cell it paints (~700 calls per repaint of the tree), each
# a Python call made while a worker may hold the GIL. Reading `Qt.DisplayRole` in PySide6 is a
# lookup through the Qt namespace, a few per data() call add up over a repaint. The roles and flags are looked up once, here, as plain ints and values.
DISPLAY, CHECK_STATE, FOREGROUND, FONT, TOOLTIP, USER = (int(role.value) for role in (
    Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.CheckStateRole, Qt.ItemDataRole.ForegroundRole,
    Qt.ItemDataRole.FontRole, Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.UserRole))
ANSWERED_ROLES = frozenset((DISPLAY, CHECK_STATE, FOREGROUND, FONT, TOOLTIP, USER))
CHECKED, UNCHECKED = Qt.CheckState.Checked, Qt.CheckState.Unchecked
HORIZONTAL = Qt.Orientation.Horizontal
NO_FLAGS = Qt.ItemFlag.NoItemFlags
ROW_FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
CHECKABLE_FLAGS = ROW_FLAGS | Qt.ItemFlag.ItemIsUserCheckable


class OutputsTreeModel(QAbstractItemModel):
    """See the module docstring. `checked_outputs()` is what the export keeps."""

    checkedChanged = Signal()  # noqa: N815 - Qt naming

    def __init__(self, index: TensorIndex | None = None, parent=None, tree: Tree | None = None) -> None:
        """`tree`: `build_tree(index)` made beforehand (in the worker), else built here."""
        super().__init__(parent)
        self.tensor_index = index
        self.allow_training_only = False
        self._checked: dict[str, None] = {}
        self._tree = Tree(TreeNode("", None, 0), [])
        self._text = ""
        self._outputs_only = False
        self._suggested = frozenset(index.suggested) if index is not None else frozenset()
        self._bold = QFont()  # group rows (made here: a QFont wants the application to exist)
        self._bold.setBold(True)
        if index is not None:
            self._checked = dict.fromkeys(index.default_outputs())
            self._tree = tree if tree is not None else build_tree(index)
        self._flat = _flat_groups(self._tree)

    @property
    def _root(self) -> TreeNode:
        return self._tree.root

    # --- what the app asks -------------------------------------------------------------------
    def checked_outputs(self) -> list[str]:
        return list(self._checked)

    def set_checked_outputs(self, names: list[str]) -> None:
        self._checked = dict.fromkeys(names)
        self._changed_all()

    def set_checked(self, name: str, on: bool) -> bool:
        info = self.tensor_index.tensors.get(name) if self.tensor_index else None
        if info is None or not self._checkable(info):
            return False
        if on:
            self._checked[name] = None
        else:
            self._checked.pop(name, None)
        self._changed_all()
        return True

    def filter(self) -> tuple[str, bool]:
        return self._text, self._outputs_only

    def set_filter(self, text: str, outputs_only: bool, tree: Tree | None = None) -> None:
        """Show only names containing `text` (and only outputs); `tree`: the filtered tree built
        beforehand in the worker (`build_tree(index, text, outputs_only)`), else built here."""
        if (text, outputs_only) == (self._text, self._outputs_only) or self.tensor_index is None:
            return
        self._text, self._outputs_only = text, outputs_only
        self.beginResetModel()
        self._tree = tree if tree is not None else build_tree(self.tensor_index, text, outputs_only)
        self._flat = _flat_groups(self._tree)
        self.endResetModel()

    def node(self, index: ItemIndex) -> TreeNode | TensorInfo:
        """The row at `index`: a group (`TreeNode`) or a tensor (`TensorInfo`); the root if invalid."""
        if not index.isValid():
            return self._root
        return index.internalPointer().entries[index.row()]

    def info(self, index: ItemIndex) -> TensorInfo | None:
        item = self.node(index) if index.isValid() else None
        return item if isinstance(item, TensorInfo) else None

    def index_of(self, name: str) -> QModelIndex:
        """The model index of tensor `name` in the current tree (invalid if filtered out)."""
        info = self.tensor_index.tensors.get(name) if self.tensor_index is not None else None
        group = self._tree.group_of(info, self.tensor_index) if info is not None else None
        if group is not None:
            for row, entry in enumerate(group.entries):
                if entry is info:
                    return self.createIndex(row, 0, group)
        return QModelIndex()

    def group_indexes(self, depth: int = 1) -> list[QModelIndex]:
        """Group rows down to `depth` levels (to expand them)."""
        found: list[QModelIndex] = []
        level = [(self._root, 1)]
        while level:
            group, d = level.pop()
            for row, entry in enumerate(group.entries):
                if isinstance(entry, TreeNode):
                    found.append(self.createIndex(row, 0, group))
                    if d < depth:
                        level.append((entry, d + 1))
        return found

    def visible_tensor_count(self) -> int:
        return self._root.count

    def types_changed(self) -> None:
        """Shapes and dtypes arrived after the tree was shown (graph.index_types): repaint."""
        self.layoutAboutToBeChanged.emit()
        self.layoutChanged.emit()

    def _checkable(self, info: TensorInfo) -> bool:
        if info.kind in (TensorKind.INPUT, TensorKind.PARAMETER):
            return False
        return self.allow_training_only or not info.training_only

    def _changed_all(self) -> None:
        self.checkedChanged.emit()
        self.layoutChanged.emit()  # repaint check marks without rebuilding

    # --- QAbstractItemModel --------------------------------------------------------------------
    def index(self, row: int, column: int, parent: ItemIndex = QModelIndex()) -> QModelIndex:  # noqa: B008
        group = self.node(parent)
        if isinstance(group, TreeNode) and 0 <= row < len(group.entries) and 0 <= column < len(COLUMNS):
            return self.createIndex(row, column, group)
        return QModelIndex()

    def parent(self, index: ItemIndex = QModelIndex()) -> QModelIndex:  # noqa: B008
        if not index.isValid():
            return QModelIndex()
        group: TreeNode = index.internalPointer()
        if group.parent is None:  # a top-level row
            return QModelIndex()
        return self.createIndex(group.row, 0, group.parent)

    def rowCount(self, parent: ItemIndex = QModelIndex()) -> int:  # noqa: N802, B008
        if parent.isValid() and parent.column() != 0:
            return 0
        item = self.node(parent)
        return len(item.entries) if isinstance(item, TreeNode) else 0

    def columnCount(self, parent: ItemIndex = QModelIndex()) -> int:  # noqa: N802, B008
        return len(COLUMNS)

    def hasChildren(self, parent: ItemIndex = QModelIndex()) -> bool:  # noqa: N802, B008
        return self.rowCount(parent) > 0

    def headerData(self, section: int, orientation, role: int = DISPLAY):  # noqa: N802
        if orientation == HORIZONTAL and role == DISPLAY:
            return COLUMNS[section]
        return None

    def flags(self, index: ItemIndex):
        if not index.isValid():
            return NO_FLAGS
        info = self.info(index)
        if info is not None and index.column() == 0 and self._checkable(info):
            return CHECKABLE_FLAGS
        return ROW_FLAGS

    def data(self, index: ItemIndex, role: int = DISPLAY):
        if role not in ANSWERED_ROLES or not index.isValid():
            return None  # alignment, background, decoration, size hint: Qt's defaults
        item = index.internalPointer().entries[index.row()]
        info = None if isinstance(item, TreeNode) else item
        col = index.column()
        if role == DISPLAY:
            if info is None:
                return f"{item.label}  ({item.count})" if col == 0 else None
            if col == 4 and info.name in self._suggested:
                return "output (suggested)"
            if col == 0 and index.internalPointer() not in self._flat:  # under its scope: what it adds
                return short_name(info)
            return _cell(info, col)
        if role == CHECK_STATE and col == 0 and info is not None and self._checkable(info):
            return CHECKED if info.name in self._checked else UNCHECKED
        if role == FOREGROUND and info is not None and (info.training_only or not self._checkable(info)):
            return GREY
        if role == FONT and info is None:
            return self._bold
        if role == TOOLTIP and info is not None:
            return plain_tip(_tooltip(info))  # names from the file: shown as written
        if role == USER:
            return info.name if info is not None else None
        return None

    def setData(self, index: ItemIndex, value, role: int = Qt.EditRole) -> bool:  # noqa: N802
        if role != CHECK_STATE or not index.isValid():
            return False
        info = self.info(index)
        if info is None or not self._checkable(info):
            return False
        on = Qt.CheckState(value) == CHECKED if not isinstance(value, bool) else value
        if on:
            self._checked[info.name] = None
        else:
            self._checked.pop(info.name, None)
        self.dataChanged.emit(index, index, [CHECK_STATE])
        self.checkedChanged.emit()
        return True


def _flat_groups(tree: Tree) -> tuple[TreeNode, ...]:
    """The groups whose rows show whole names: "Outputs" and "Inputs and parameters" (no scope above them)."""
    return tuple(g for g in (tree.root.child_group(OUTPUTS_GROUP), tree.root.child_group(INPUTS_GROUP))
                 if g is not None)


def _cell(info: TensorInfo, col: int) -> str:
    if col == 0:
        return info.name
    if col == 1:
        return readable_shape(info.shape)
    if col == 2:
        return info.dtype or "?"
    if col == 3:
        return info.producer_op or ""
    kind = info.kind.value
    return f"{kind}, training" if info.training_only else kind


def _tooltip(info: TensorInfo) -> str:
    lines = [info.name, f"{info.dtype or '?'} {readable_shape(info.shape)}"]
    if info.producer_op:
        lines.append(f"from {info.producer_op} ({info.producer})")
    if info.training_only:
        lines.append("training-only: feeds or follows the loss")
    return "\n".join(lines)
