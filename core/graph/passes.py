"""The one shape of a graph transformation: `pass(model, ...) -> PassResult`.

Every pass (prune, inference form, constant folding, preview) takes the model first and returns a
`PassResult`, and keeps this contract:
- **In place.** It edits the `ModelProto` given and returns it as `result.model`; nothing is
  copied. A caller that must keep its model passes a copy (`io.model_io.copy_without_initializers`
  / `strip_weights` make one without copying weight bytes).
- **Reported.** `changed` is True exactly when the model differs; every node touched is one
  `NodeChange` in `changes` (name, `REMOVED`/`REWRITTEN`/`FOLDED`/`ADDED`, why), in the order made
  (a consumer reading past a REMOVED node is part of that removal); the rest: a line each in `notes`.
- **Never fails on a valid graph.** What it cannot transform stays as it is; only invalid requests
  raise (`OnnxportError`, before anything is edited; a caller's bug raises `ValueError`).
- **No disk, no weights decoded** unless the pass says so (folding computes small constants).
Checked, not only written: tests/support/pass_check.py runs every pass and verifies this. In the
spirit of onnx-ir's `PassResult(model, modified)`, over `onnx.ModelProto` (onnxport builds no IR)."""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

REMOVED = "removed"  # the node left the graph (pruned, bypassed, dead)
REWRITTEN = "rewritten"  # the node stayed, with other attributes, inputs, outputs or op type
FOLDED = "folded"  # the node was computed: its output is now a constant
ADDED = "added"  # the pass made the node
ACTIONS = (REMOVED, REWRITTEN, FOLDED, ADDED)


@dataclass(frozen=True)
class NodeChange:
    """What a pass did to one node."""

    node: str  # the node's name, or its first output's name when it has none
    action: str  # one of ACTIONS
    reason: str = ""  # a few words: "Dropout bypassed", "training_mode=0"


@dataclass
class PassResult:
    """The outcome of a pass. See the module docstring for the contract."""

    model: onnx.ModelProto
    changed: bool = False
    changes: list[NodeChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def names(self, *actions: str) -> list[str]:
        """The names of the nodes changed (only those of `actions`, if given), in order."""
        return [c.node for c in self.changes if not actions or c.action in actions]


def node_label(node: onnx.NodeProto) -> str:
    """How a change names a node: its name, else its first output, else its op type."""
    return node.name or next((o for o in node.output if o), "") or node.op_type
