"""Build the bundled example (`resources/examples/`) with ONNX Runtime's own training API.

    python scripts/make_example.py resources/examples

A small classifier (two Linear layers with Dropout, 3 classes on synthetic 2-D "moons" data) is
exported from PyTorch in training mode (seed 002), turned into training artifacts with
`onnxruntime.training.artifacts.generate_artifacts`, trained for a few hundred steps with
`onnxruntime.training.api`, and saved: `eval_model.onnx` + `checkpoint` are what the app opens.
The eval graph's only output is the loss; the forward outputs `logits` and `probabilities` are
inside it, which is exactly what onnxport's export is for.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np


def synthetic_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three noisy interleaved arcs in 2-D, lifted to 8 features."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    angle = rng.uniform(0, np.pi, n)
    centers = np.array([[0.0, 0.0], [1.0, 0.5], [2.0, 0.0]])
    xy = np.stack([np.cos(angle), np.sin(angle) * (1 - 2 * (labels % 2))], 1) + centers[labels]
    xy += rng.normal(0, 0.15, xy.shape)
    features = np.concatenate([xy, xy**2, np.sin(xy), xy[:, :1] * xy[:, 1:], np.ones((n, 1))], 1)
    return features.astype(np.float32), labels.astype(np.int64)


def export_forward(path: Path) -> None:
    import torch

    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 32)
            self.dropout = torch.nn.Dropout(0.1)
            self.fc2 = torch.nn.Linear(32, 3)

        def forward(self, x):
            logits = self.fc2(self.dropout(torch.relu(self.fc1(x))))
            return logits, torch.softmax(logits, dim=-1)

    torch.manual_seed(0)
    model = Classifier().train()
    torch.onnx.export(
        model, (torch.randn(4, 8),), str(path), export_params=True, do_constant_folding=False,
        training=torch.onnx.TrainingMode.TRAINING, opset_version=16, dynamo=False,
        input_names=["input"], output_names=["logits", "probabilities"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}, "probabilities": {0: "batch"}},
    )


def build(out_dir: Path, steps: int = 300) -> None:
    import onnx
    from onnxruntime.training import artifacts
    from onnxruntime.training.api import CheckpointState, Module, Optimizer

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        export_forward(work / "forward.onnx")
        forward = onnx.load(work / "forward.onnx")
        params = [t.name for t in forward.graph.initializer if t.name.endswith(("weight", "bias"))]
        artifacts.generate_artifacts(
            forward, requires_grad=params, frozen_params=[], loss=artifacts.LossType.CrossEntropyLoss,
            optimizer=artifacts.OptimType.AdamW, artifact_directory=work, loss_input_names=["logits"],
        )
        state = CheckpointState.load_checkpoint(str(work / "checkpoint"))
        module = Module(str(work / "training_model.onnx"), state, str(work / "eval_model.onnx"))
        optimizer = Optimizer(str(work / "optimizer_model.onnx"), module)
        optimizer.set_learning_rate(0.01)
        x, y = synthetic_data(2048)
        module.train()
        for step in range(steps):
            batch = slice((step * 64) % 2048, (step * 64) % 2048 + 64)
            loss = module(x[batch], y[batch])
            optimizer.step()
            module.lazy_reset_grad()
        module.eval()
        xt, yt = synthetic_data(512, seed=1)
        state.properties["epoch_steps"] = steps
        state.properties["final_train_loss"] = float(loss)
        state.properties["dataset"] = "synthetic three-arcs (scripts/make_example.py)"
        CheckpointState.save_checkpoint(state, str(work / "checkpoint"), include_optimizer_state=True)
        for name in ("eval_model.onnx", "checkpoint"):
            shutil.copyfile(work / name, out_dir / name)
        module.export_model_for_inferencing(str(work / "ort_inference.onnx"), ["probabilities"])
        import onnxruntime as ort

        probs = ort.InferenceSession(str(work / "ort_inference.onnx")).run(None, {"input": xt})[0]
        accuracy = float((probs.argmax(1) == yt).mean())
        print(f"trained {steps} steps, final loss {float(loss):.3f}, held-out accuracy {accuracy:.2%}")


if __name__ == "__main__":
    build(Path(sys.argv[1] if len(sys.argv) > 1 else "resources/examples"))
