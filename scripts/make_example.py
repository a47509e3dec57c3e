"""Build the bundled example (`resources/examples/`) with ONNX Runtime's own training API.

    python scripts/make_example.py resources/examples

A small signal classifier (two Linear layers with Dropout, 256 samples in, 3 classes: noise, a
tone, a chirp; about 200k parameters, so that int8 shrinks and speeds it, with clear margins on
random inputs, so the quantizer's generated inputs agree on the class) is exported from PyTorch in
training mode (seed 0, in onnxport's own environment), turned into
training artifacts with `onnxruntime.training.artifacts.generate_artifacts`, trained for a few
hundred steps with `onnxruntime.training.api`, and saved: `eval_model.onnx` + `checkpoint` are what
the app opens. ORT's training API runs in the training environment (onnxruntime-training 1.19.2,
see `onnxport.core.training`): this script runs under onnxport's `.venv` Python and reaches it
through `generate_training_artifacts`, `train_steps` and `ort_export`.
The eval graph's only output is the loss; the forward outputs `logits` and `probabilities` are
inside it, which is exactly what onnxport's export is for.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

SAMPLES = 256  # signal length: the model's input width
HIDDEN = 768
CLASSES = ("noise", "tone", "chirp")


def synthetic_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Unit Gaussian noise of `SAMPLES` values, plus a faint tone (class 1) or chirp (class 2)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, len(CLASSES), n)
    t = np.arange(SAMPLES) / SAMPLES
    templates = np.stack([np.zeros(SAMPLES), np.sin(2 * np.pi * 16 * t), np.sin(2 * np.pi * (4 + 24 * t) * t)])
    amplitude = rng.uniform(0.4, 0.8, (n, 1))
    signals = rng.standard_normal((n, SAMPLES)) + amplitude * templates[labels]
    return signals.astype(np.float32), labels.astype(np.int64)


def export_forward(path: Path) -> None:
    import torch

    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = torch.nn.Linear(SAMPLES, HIDDEN)
            self.dropout = torch.nn.Dropout(0.1)
            self.fc2 = torch.nn.Linear(HIDDEN, len(CLASSES))

        def forward(self, x):
            logits = self.fc2(self.dropout(torch.relu(self.fc1(x))))
            return logits, torch.softmax(logits, dim=-1)

    torch.manual_seed(0)
    model = Classifier().train()
    with warnings.catch_warnings():  # the legacy exporter is deprecated, but it is the one honouring training mode
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            model, (torch.randn(4, SAMPLES),), str(path), export_params=True, do_constant_folding=False,
            training=torch.onnx.TrainingMode.TRAINING, opset_version=16, dynamo=False,
            input_names=["input"], output_names=["logits", "probabilities"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}, "probabilities": {0: "batch"}},
        )


def build(out_dir: Path, steps: int = 300) -> None:
    import onnx
    import onnxruntime as ort

    from onnxport.core.training.artifacts import generate_training_artifacts
    from onnxport.core.training.process import TrainingProcess

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: ORT's oracle is test support
    from tests.support.ort_api import TrainingFiles, ort_export, train_steps

    training = TrainingProcess()  # UnavailableError (how to get one) without a training environment
    out_dir.mkdir(parents=True, exist_ok=True)
    with training, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        export_forward(work / "forward.onnx")
        forward = onnx.load(work / "forward.onnx")
        params = [t.name for t in forward.graph.initializer if t.name.endswith(("weight", "bias"))]
        arts = generate_training_artifacts(forward, work / "artifacts", trainable=params, frozen=[],
                                           loss="crossentropy", optimizer="adamw", loss_input="logits",
                                           training=training)
        files = TrainingFiles(arts.training_model, arts.optimizer_model, arts.eval_model)
        x, y = synthetic_data(steps * 64)  # fresh signals every step: nothing to memorise
        batches = [(x[i:i + 64], y[i:i + 64]) for i in range(0, steps * 64, 64)]
        losses = train_steps(training, files, arts.checkpoint, batches, arts.checkpoint, learning_rate=0.003)
        # The properties name the final loss, known only now: a second, step-less call sets them.
        properties = {"epoch_steps": steps, "final_train_loss": losses[-1],
                      "dataset": "synthetic noise/tone/chirp signals (scripts/make_example.py)"}
        train_steps(training, files, arts.checkpoint, [], arts.checkpoint, properties=properties)
        for name in ("eval_model.onnx", "checkpoint"):
            shutil.copyfile(work / "artifacts" / name, out_dir / name)
        ort_export(training, files, arts.checkpoint, ["probabilities"], work / "ort_inference.onnx")
        xt, yt = synthetic_data(512, seed=1)
        probs = ort.InferenceSession(str(work / "ort_inference.onnx")).run(None, {"input": xt})[0]
        accuracy = float((probs.argmax(1) == yt).mean())
        print(f"trained {steps} steps, final loss {losses[-1]:.3f}, held-out accuracy {accuracy:.2%}")


def main() -> int:
    from onnxport.core.util.errors import OnnxportError

    try:
        build(Path(sys.argv[1] if len(sys.argv) > 1 else "resources/examples"))
    except OnnxportError as exc:
        print(f"make_example: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
