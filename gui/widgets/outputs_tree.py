"""The outputs tree as plain Python: built from a TensorIndex in the worker, shown by
gui/widgets/tree_model.py (`OutputsTreeModel`).

Why plain objects (`TreeNode`, slots only) and not Qt items: a 100,000-tensor model would mean
100,000 QTreeWidgetItems created up front on the GUI thread; this tree is built off it (Qt-free
and thread-safe) and Qt only asks for the rows it paints. Layout:

- "Outputs": the model's graph outputs and suggested forward outputs (an ORT eval graph's only
  graph output is the loss), in graph order;
- then every other node output grouped by module scope (`encoder/layer.0/attention` nests);
- "Inputs and parameters" last, for browsing (they cannot be outputs).
Filtering builds a new tree (no proxy model asking every row for its text).
"""

from __future__ import annotations

from onnxport.core.graph.index import TensorIndex, TensorInfo, TensorKind

OUTPUTS_GROUP = "Outputs"
INPUTS_GROUP = "Inputs and parameters"


class TreeNode:
    """A scope group (info None) or a tensor; `row` is its position under its parent.

    Nodes point down only (`Tree.parents` maps back up): an acyclic tree is freed by reference
    counting alone the moment a new model replaces it, with no work for the cycle collector."""

    __slots__ = ("label", "info", "children", "row", "_groups", "_count")

    def __init__(self, label: str, info: TensorInfo | None, row: int) -> None:
        self.label = label
        self.info = info
        self.children: list[TreeNode] = []
        self.row = row
        self._groups: dict[str, TreeNode] | None = None
        self._count: int | None = None

    def add(self, label: str, info: TensorInfo | None) -> TreeNode:
        child = TreeNode(label, info, len(self.children))
        self.children.append(child)
        return child

    def group(self, label: str) -> TreeNode:
        if self._groups is None:
            self._groups = {}
        node = self._groups.get(label)
        if node is None:
            node = self._groups[label] = self.add(label, None)
        return node

    def count(self) -> int:
        """Tensors below this node (cached: the tree does not change once built)."""
        if self.info is not None:
            return 1
        if self._count is None:
            self._count = sum(c.count() for c in self.children)
        return self._count


class Tree:
    """A built tree: its root and each group's parent (tensors are looked up through groups)."""

    __slots__ = ("root", "parents")

    def __init__(self, root: TreeNode) -> None:
        self.root = root
        self.parents: dict[int, TreeNode] = {}
        order = [root]  # groups, parents before children
        for node in order:
            for child in node.children:
                self.parents[id(child)] = node
                if child.info is None:
                    order.append(child)
        for group in reversed(order):  # counts now, in the worker, not on the first paint
            group._count = sum(1 if c.info is not None else c._count for c in group.children)

    def parent_of(self, node: TreeNode) -> TreeNode | None:
        return self.parents.get(id(node))


def build_tree(index: TensorIndex, text: str = "", outputs_only: bool = False) -> Tree:
    """The plain tree for `index`, keeping names containing `text` (case-insensitive).
    Qt-free and thread-safe: the app builds it in the worker."""
    root = _build_nodes(index, text, outputs_only)
    return Tree(root)


def _build_nodes(index: TensorIndex, text: str, outputs_only: bool) -> TreeNode:
    root = TreeNode("", None, 0)
    needle = text.strip().lower()
    top = set(index.graph_outputs) | set(index.suggested)
    tensors = index.tensors
    outputs = [tensors[n] for n in tensors if n in top]
    if needle:
        outputs = [t for t in outputs if needle in t.name.lower()]
    if outputs:
        group = root.group(OUTPUTS_GROUP)
        for info in outputs:
            group.add(info.name, info)
    if outputs_only:
        return root
    inputs: list[TensorInfo] = []
    for info in tensors.values():
        if needle and needle not in info.name.lower():
            continue
        if info.kind in (TensorKind.INPUT, TensorKind.PARAMETER):
            inputs.append(info)
            continue
        if info.name in top:
            continue
        parent = root
        if info.scope:
            for part in info.scope.split("/"):
                parent = parent.group(part)
        parent.add(info.name, info)
    if inputs:
        group = root.group(INPUTS_GROUP)
        for info in inputs:
            group.add(info.name, info)
    return root
