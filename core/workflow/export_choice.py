"""What an export with these outputs would do that a first-time user should hear about first.

Contract: `review_export(model_path, outputs, parameter_names)` is a query (nothing written, no
weight read): it loads and indexes the graph, plans the prune, and returns an `ExportReview`:
- `outputs`: those asked for, or the suggested ones `onnxport inspect` prints (`defaulted`);
- `training_only` / `training_inputs`: chosen outputs that matter only for training (the loss) and
  the inputs kept only for them (`labels`);
- `dangling`: parameter-like graph inputs (`fc1.weight`...) with no initializer and no value from
  `parameter_names`: an eval graph exported without its checkpoint;
- `checkpoint_beside`: a `checkpoint` next to the model, for the hint;
- `model`, `table`, `plan`: the graph (weights left on disk), its table and the prune plan, with
  `parameter_names` the plan the export of `outputs` makes: the export takes them, not made again.
Front ends decide what to do with it (the CLI stops on `dangling`, warns on `training_only`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core.graph.graph_table import GraphTable, plan_prune_table
from onnxport.core.graph.index import build_index, training_only
from onnxport.core.graph.prune import PrunePlan
from onnxport.core.io.model_io import load_graph
from onnxport.core.params.match import PARAM_NAME
from onnxport.core.util.errors import UnknownOutputError


@dataclass
class ExportReview:
    outputs: list[str]
    defaulted: bool = False
    training_only: list[str] = field(default_factory=list)
    training_inputs: list[str] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)
    checkpoint_beside: Path | None = None
    model: onnx.ModelProto | None = field(default=None, repr=False)
    table: GraphTable | None = field(default=None, repr=False)  # `model`'s nodes
    plan: PrunePlan | None = field(default=None, repr=False)  # the prune plan of `outputs`


def review_export(model_path: str | Path, outputs: Sequence[str] | None,
                  parameter_names: Iterable[str] = (), *, model: onnx.ModelProto | None = None) -> ExportReview:
    """See the module docstring. `outputs` None or empty: the suggested outputs; `model`: the graph
    of `model_path` when the caller loaded it."""
    model_path = Path(model_path)
    model = model if model is not None else load_graph(model_path)
    known = set(parameter_names)
    initializers = {t.name for t in model.graph.initializer}
    param_like = [vi.name for vi in model.graph.input
                  if vi.name not in initializers and (vi.name in known or PARAM_NAME.search(vi.name))]
    chosen, defaulted = list(outputs or []), not outputs
    if defaulted:  # the index suggests them (no types needed: shape inference is not even started)
        index = build_index(model, model_path, parameter_names=param_like, typed=False)
        table = index.table
        chosen = index.default_outputs()
        if not chosen:
            raise UnknownOutputError(f"{model_path}: no suggested outputs to export",
                                     hint=f"name them with --outputs; 'onnxport inspect {model_path}' lists the tensors")
        training = {n for n, t in index.tensors.items() if t.training_only}
    else:  # named: the table is enough (the export's copy of the weights waits for this review)
        table = GraphTable.read(model.graph)
        training = training_only(model, table, param_like)
    plan = plan_prune_table(model, table, chosen, known)
    beside = model_path.parent / "checkpoint"
    return ExportReview(
        outputs=plan.outputs,
        defaulted=defaulted,
        training_only=[n for n in plan.outputs if n in training],
        training_inputs=[n for n in plan.inputs if n in training],
        dangling=[n for n in plan.inputs if n in param_like and n not in known],
        checkpoint_beside=beside if beside.exists() else None,
        model=model,
        table=table,
        plan=plan,
    )
