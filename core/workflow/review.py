"""What an export with these outputs would do that a first-time user should hear about first.

Contract: `review_export(session, outputs)` is a query on an opened model (nothing written, no
weight read) returning an `ExportReview`:
- `outputs`: those asked for, or the suggested ones `onnxport inspect` prints (`defaulted`);
- `training_only` / `training_inputs`: chosen outputs that matter only for training (the loss) and
  the inputs kept only for them (`labels`);
- `checkpoint_beside`: a `checkpoint` next to the model, for a hint.
The prune plan it reads is the session's (`ModelSession.plan`): the export takes that one. Front
ends decide what to say (the CLI warns on `training_only`); parameter inputs left without values
are the checkpoint policy's (`params.checkpoint_fit`), held by the export job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from onnxport.core.graph.index import build_index, training_only
from onnxport.core.params.match import PARAM_NAME
from onnxport.core.util.errors import UnknownOutputError
from onnxport.core.workflow.session import ModelSession


@dataclass
class ExportReview:
    outputs: list[str]
    defaulted: bool = False
    training_only: list[str] = field(default_factory=list)
    training_inputs: list[str] = field(default_factory=list)
    checkpoint_beside: Path | None = None


def review_export(session: ModelSession, outputs: Sequence[str] | None) -> ExportReview:
    """See the module docstring. `outputs` None or empty: the suggested outputs."""
    model, model_path = session.graph, Path(session.model_path)
    known = set(session.params or ())
    initializers = {t.name for t in model.graph.initializer}
    param_like = [vi.name for vi in model.graph.input
                  if vi.name not in initializers and (vi.name in known or PARAM_NAME.search(vi.name))]
    chosen, defaulted = list(outputs or []), not outputs
    if defaulted:  # the index suggests them (no types needed: shape inference is not even started)
        index = session.index or build_index(model, model_path, parameter_names=param_like, typed=False)
        chosen = index.default_outputs()
        if not chosen:
            raise UnknownOutputError(f"{model_path}: no suggested outputs to export",
                                     hint=f"name them with --outputs; 'onnxport inspect {model_path}' lists the tensors")
        training = {n for n, t in index.tensors.items() if t.training_only}
    else:  # named: the table is enough (the export's copy of the weights waits for this review)
        training = training_only(model, session.table, param_like)
    plan = session.plan(chosen)
    beside = model_path.parent / "checkpoint"
    return ExportReview(
        outputs=plan.outputs,
        defaulted=defaulted,
        training_only=[n for n in plan.outputs if n in training],
        training_inputs=[n for n in plan.inputs if n in training],
        checkpoint_beside=beside if beside.exists() else None,
    )
