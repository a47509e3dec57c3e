"""The outputs tree as plain Python: built from a TensorIndex in the worker, shown by
gui/widgets/tree_model.py (`OutputsTreeModel`).

Why plain objects and not Qt items: a 100,000-tensor model would mean 100,000 items made up front
on the GUI thread; this tree is built off it (Qt-free, thread-safe) in one pass and Qt asks only
for the rows it paints. Only groups are objects (`TreeNode`): a group lists its rows (`entries`:
the index's own `TensorInfo`s and child groups) and knows its parent and row.
Layout:
- "Outputs": graph outputs and suggested forward outputs, in graph order;
- every other node output grouped by module scope (`encoder/layer.0/attention` nests), a group's
  own tensors before its sub-groups;
- "Other tensors": node outputs with no scope;
- "Inputs and parameters" last, for browsing (they cannot be outputs).
Filtering builds a new tree (no proxy model asking every row for its text).
"""

from __future__ import annotations

from onnxport.core.graph.index import TensorIndex, TensorInfo, TensorKind

OUTPUTS_GROUP = "Outputs"
OTHER_GROUP = "Other tensors"
INPUTS_GROUP = "Inputs and parameters"


class TreeNode:
    """A group of rows: a scope (`encoder/layer.0`), "Outputs", "Inputs and parameters", or the
    root. `entries` are its rows in order (`TensorInfo` or `TreeNode`); `row` is its own row
    under `parent`; `count` the tensors below it (summed once, when the tree is built)."""

    __slots__ = ("label", "parent", "row", "entries", "count", "_groups")

    info = None  # a group is no tensor (rows that are tensors are `TensorInfo`s)

    def __init__(self, label: str, parent: TreeNode | None, row: int) -> None:
        self.label = label
        self.parent = parent
        self.row = row
        self.entries: list[TensorInfo | TreeNode] = []
        self.count = 0
        self._groups: dict[str, TreeNode] | None = None

    def group(self, label: str) -> TreeNode:
        """The child group `label`, added as the next row if new."""
        if self._groups is None:
            self._groups = {}
        node = self._groups.get(label)
        if node is None:
            node = self._groups[label] = TreeNode(label, self, len(self.entries))
            self.entries.append(node)
        return node

    def child_group(self, label: str) -> TreeNode | None:
        return self._groups.get(label) if self._groups is not None else None


class Tree:
    """A built tree: its root group and every group, parents before children."""

    __slots__ = ("root", "groups")

    def __init__(self, root: TreeNode, groups: list[TreeNode]) -> None:
        self.root = root
        self.groups = groups

    def group_of(self, info: TensorInfo, index: TensorIndex) -> TreeNode | None:
        """The group whose rows hold `info` (None if this tree has no such group)."""
        top = self.root.child_group(OUTPUTS_GROUP)
        if top is not None and (info.name in index.graph_outputs or info.name in index.suggested):
            return top
        if info.kind in (TensorKind.INPUT, TensorKind.PARAMETER):
            return self.root.child_group(INPUTS_GROUP)
        if not info.scope:
            return self.root.child_group(OTHER_GROUP)
        node: TreeNode | None = self.root
        for part in info.scope.split("/") if info.scope else ():
            node = node.child_group(part)
            if node is None:
                return None
        return node


def build_tree(index: TensorIndex, text: str = "", outputs_only: bool = False) -> Tree:
    """The plain tree for `index`, keeping names containing `text` (case-insensitive).
    Qt-free and thread-safe: the app builds it in the worker."""
    root = TreeNode("", None, 0)
    groups = [root]
    needle = text.strip().lower()
    top = set(index.graph_outputs) | set(index.suggested)
    tensors = index.tensors
    outputs = [tensors[n] for n in tensors if n in top]
    if needle:
        outputs = [t for t in outputs if needle in t.name.lower()]
    if outputs:
        group = root.group(OUTPUTS_GROUP)
        groups.append(group)
        group.entries.extend(outputs)
        group.count = len(outputs)
    if not outputs_only:
        _add_scopes(root, groups, tensors.values(), needle, top)
    for group in reversed(groups):  # children after parents: sum upwards
        if group.parent is not None:
            group.parent.count += group.count
    return Tree(root, groups)


def _add_scopes(root: TreeNode, groups: list[TreeNode], infos, needle: str, top: set[str]) -> None:
    """Every other tensor under its scope's group (its tensors before its sub-groups), those with
    no scope in "Other tensors", then "Inputs and parameters"."""
    by_scope: dict[str, TreeNode] = {"": root}
    inputs: list[TensorInfo] = []
    not_outputs = (TensorKind.INPUT, TensorKind.PARAMETER)
    direct = 0  # tensors right under the root
    for info in infos:
        if needle and needle not in info.name.lower():
            continue
        if info.kind in not_outputs:
            inputs.append(info)
            continue
        if info.name in top:
            continue
        scope = info.scope
        group = by_scope.get(scope)
        if group is None:
            group = _scope_group(scope, by_scope, groups)
        group.entries.append(info)
        if group is root:
            direct += 1
        else:
            group.count += 1
    loose = [e for e in root.entries if not isinstance(e, TreeNode)]
    root.entries = [e for e in root.entries if isinstance(e, TreeNode)]
    for row, group in enumerate(root.entries):
        group.row = row
    for group in groups:
        _tensors_first(group)
    if loose:
        group = root.group(OTHER_GROUP)
        groups.append(group)
        group.entries.extend(loose)
        group.count = direct
    if inputs:
        new = root.child_group(INPUTS_GROUP) is None
        group = root.group(INPUTS_GROUP)
        if new:
            groups.append(group)
        group.entries.extend(inputs)
        group.count += len(inputs)


def _tensors_first(group: TreeNode) -> None:
    """A group's own tensors, then its sub-groups (each keeping its order); rows renumbered."""
    entries = group.entries
    if not any(isinstance(e, TreeNode) for e in entries) or all(isinstance(e, TreeNode) for e in entries):
        return
    group.entries = [e for e in entries if not isinstance(e, TreeNode)] + [e for e in entries if isinstance(e, TreeNode)]
    for row, entry in enumerate(group.entries):
        if isinstance(entry, TreeNode):
            entry.row = row


def _scope_group(scope: str, by_scope: dict[str, TreeNode], groups: list[TreeNode]) -> TreeNode:
    """The group of `scope` (`a/b/c`), made with its missing parents (parents first)."""
    parent_scope, _, label = scope.rpartition("/")
    parent = by_scope.get(parent_scope)
    if parent is None:
        parent = _scope_group(parent_scope, by_scope, groups)
    new = parent.child_group(label) is None
    group = parent.group(label)
    if new:
        groups.append(group)
    by_scope[scope] = group
    return group
