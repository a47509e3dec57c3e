"""ONNX Runtime's own training API, used across the training boundary: the oracle that tests,
benches and scripts/make_example.py hold onnxport against (the product never calls it).

Each function runs one operation of `runner.py` in a `TrainingProcess`: ORT's `Module` and
`Optimizer` training steps on a set of artifacts, ORT's `export_model_for_inferencing` (the
reference onnxport's export is held against), and what ORT's `CheckpointState` reads from a
checkpoint. Arrays travel as `.npz` files in a temp folder that is removed afterwards; outputs
are written where the caller says.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from onnxport.core.training.process import TrainingProcess
from onnxport.core.util.progress import CancelToken, ProgressFn


@dataclass
class TrainingFiles:
    """The artifacts ORT's Module needs (`eval_model` None: a Module without the eval graph)."""

    training_model: Path
    optimizer_model: Path
    eval_model: Path | None = None

    def args(self) -> dict:
        return {"training_model": Path(self.training_model), "optimizer_model": Path(self.optimizer_model),
                "eval_model": Path(self.eval_model) if self.eval_model else None}


@dataclass
class OrtCheckpoint:
    """A checkpoint as ORT's CheckpointState sees it."""

    requires_grad: dict[str, bool | None]  # None: ORT cannot tell (a nominal state)
    properties: dict[str, int | float | str]
    values: dict[str, np.ndarray] = field(default_factory=dict)
    values_refused: str | None = None  # ORT's message when it hands out no values (nominal)


def train_steps(training: TrainingProcess, files: TrainingFiles, checkpoint: str | Path,
                batches: Sequence[Sequence[np.ndarray]], out_checkpoint: str | Path, *,
                learning_rate: float | None = None, properties: dict | None = None,
                include_optimizer_state: bool = True, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None) -> list[float]:
    """One ORT training step per batch (inputs then labels, positional); the losses.

    The state is saved to `out_checkpoint` afterwards (with the optimizer state unless told not
    to), with `properties` set; with an eval graph the Module is left in eval mode first.
    """
    with tempfile.TemporaryDirectory(prefix="onnxport-train-") as tmp:
        data = Path(tmp) / "batches.npz"
        np.savez(data, **{f"b{i}_{j}": np.asarray(a) for i, batch in enumerate(batches)
                          for j, a in enumerate(batch)})
        result = training.call("train", {
            **files.args(), "checkpoint": Path(checkpoint), "out_checkpoint": Path(out_checkpoint),
            "batches": data, "steps": len(batches), "learning_rate": learning_rate,
            "properties": dict(properties or {}), "include_optimizer_state": include_optimizer_state,
        }, progress=progress, cancel=cancel)
    return list(result["losses"])


def ort_export(training: TrainingProcess, files: TrainingFiles, checkpoint: str | Path,
               outputs: Sequence[str], out: str | Path) -> Path:
    """ORT's `Module.export_model_for_inferencing` of `checkpoint`'s state into `out`."""
    training.call("export", {**files.args(), "checkpoint": Path(checkpoint), "outputs": list(outputs),
                             "out": Path(out)})
    return Path(out)


def read_ort_checkpoint(training: TrainingProcess, checkpoint: str | Path) -> OrtCheckpoint:
    """Names, requires_grad, properties and values as ORT's CheckpointState loads them."""
    with tempfile.TemporaryDirectory(prefix="onnxport-ckpt-") as tmp:
        values_path = Path(tmp) / "values.npz"
        result = training.call("checkpoint", {"checkpoint": Path(checkpoint), "values": values_path})
        values = {}
        if "value_keys" in result:
            with np.load(values_path) as data:
                values = {name: data[key] for name, key in result["value_keys"].items()}
    return OrtCheckpoint(dict(result["parameters"]), dict(result["properties"]), values,
                         result.get("values_refused"))
