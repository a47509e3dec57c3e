"""ONNX Runtime training artifacts from a forward graph (seed 002's next step).

Contract: `generate_training_artifacts(forward, out_dir, trainable=..., frozen=..., loss=...,
optimizer=...)` writes `training_model.onnx`, `eval_model.onnx`, `optimizer_model.onnx` and
`checkpoint` through ORT's `generate_artifacts`, which exists only in onnxruntime-training 1.19.2:
the graph is repaired here and handed as a file to the training environment's child
(training/process.py; progress and cancel carried across). Without that environment:
`UnavailableError`, one line. Nothing lands in `out_dir` unless generation succeeds.
Parameters: the float initializers, all trainable but BatchNorm running statistics; `trainable` /
`frozen` take names or fnmatch patterns (with only one given, the rest is the other).
Repairs of ORT's builder (listed in `repairs`): LayerNormalization with only `Y` gets its optional
outputs; a single-output Dropout gets its mask; BatchNormalization in training form gets its
inference form in the eval graph. BatchNorm statistics are updated by training steps with the
biased batch variance (said in `notes`). An op without a gradient on a trainable path fails with
ORT's own message."""

from __future__ import annotations

import difflib
import fnmatch
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core.io.run_reads import model_reads
from onnxport.core.training.choices import LOSSES, OPTIMIZERS
from onnxport.core.training.process import TrainingProcess
from onnxport.core.util.atomic import AtomicWrite
from onnxport.core.util.errors import OnnxportError, cannot_write, no_such_file
from onnxport.core.util.out_paths import check_output
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter

# onnxruntime-training 1.19.2 ships with onnx < 1.18, which refuses IR versions above 10.
TRAINING_MAX_IR = 10
BIG_MODEL_BYTES = 1536 << 20  # above this, the forward graph goes to the child with external data

FILES = ("training_model.onnx", "eval_model.onnx", "optimizer_model.onnx", "checkpoint", "nominal_checkpoint")
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}


@dataclass
class ArtifactsResult:
    folder: Path
    training_model: Path
    eval_model: Path
    optimizer_model: Path | None
    checkpoint: Path
    trainable: list[str]
    frozen: list[str]
    loss: str
    optimizer: str
    loss_input: str | None
    repairs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"folder": str(self.folder), "training_model": str(self.training_model),
                "eval_model": str(self.eval_model),
                "optimizer_model": str(self.optimizer_model) if self.optimizer_model else None,
                "checkpoint": str(self.checkpoint), "trainable": len(self.trainable), "frozen": len(self.frozen),
                "loss": self.loss, "optimizer": self.optimizer, "loss_input": self.loss_input,
                "repairs": self.repairs, "notes": self.notes, "seconds": round(self.seconds, 3)}


def running_statistics(model: onnx.ModelProto) -> list[str]:
    """Names fed to BatchNormalization as running mean/var (inputs 3 and 4)."""
    return [n.input[i] for n in model.graph.node if n.op_type == "BatchNormalization"
            for i in (3, 4) if len(n.input) > i and n.input[i]]


def parameter_candidates(model: onnx.ModelProto) -> list[str]:
    """Float initializers: the tensors that can be trainable or frozen."""
    return [t.name for t in model.graph.initializer if t.data_type in FLOAT_TYPES]


def select_names(patterns: Iterable[str], candidates: list[str], what: str) -> list[str]:
    """Names in `candidates` matching `patterns` (exact names or fnmatch globs), in graph order."""
    chosen: set[str] = set()
    for pattern in patterns:
        hits = [c for c in candidates if c == pattern or fnmatch.fnmatchcase(c, pattern)]
        if not hits:
            close = difflib.get_close_matches(pattern, candidates, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else f"the graph has {len(candidates)} parameters"
            raise OnnxportError(f"{what} '{pattern}' is not a float initializer of the forward graph", hint=hint)
        chosen.update(hits)
    return [c for c in candidates if c in chosen]


def split_parameters(model: onnx.ModelProto, trainable: Iterable[str] | None = None,
                     frozen: Iterable[str] | None = None) -> tuple[list[str], list[str]]:
    """(trainable, frozen) names per the module docstring's rules."""
    candidates = parameter_candidates(model)
    stats = set(running_statistics(model))
    if trainable is None and frozen is None:
        return [c for c in candidates if c not in stats], [c for c in candidates if c in stats]
    t = select_names(trainable, candidates, "trainable parameter") if trainable is not None else None
    f = select_names(frozen, candidates, "frozen parameter") if frozen is not None else None
    if t is None:
        t = [c for c in candidates if c not in set(f) and c not in stats]
        f = [c for c in candidates if c in set(f) or c in stats]
    if f is None:
        f = [c for c in candidates if c not in set(t)]
    both = set(t) & set(f)
    if both:
        raise OnnxportError(f"'{sorted(both)[0]}' is both trainable and frozen")
    bad = [n for n in t if n in stats]
    if bad:
        raise OnnxportError(f"'{bad[0]}' is a BatchNormalization running statistic: it has no gradient, "
                            "so it can only be frozen")
    if not t:
        raise OnnxportError("no trainable parameters chosen: nothing to train")
    return t, f


def repair_forward(model: onnx.ModelProto) -> list[str]:
    """Add the optional outputs ORT's gradient builder reads (LayerNormalization, Dropout)."""
    repairs = []
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "LayerNormalization" and len(node.output) < 3:
            base = node.output[0]
            while len(node.output) < 3:
                node.output.append(f"{base}__onnxport_{('mean', 'inv_std_dev')[len(node.output) - 1]}")
            repairs.append(f"{node.name or base}: LayerNormalization given its Mean/InvStdDev outputs")
        elif node.op_type == "Dropout" and len(node.output) < 2:
            node.output.append(f"{node.output[0]}__onnxport_mask")
            repairs.append(f"{node.name or node.output[0]}: Dropout given its mask output")
    return repairs


def repair_eval(model: onnx.ModelProto) -> list[str]:
    """BatchNormalization in the eval graph: training_mode=0 and only `Y` (what ORT can load)."""
    used = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    repairs = []
    for node in model.graph.node:
        if node.op_type != "BatchNormalization" or node.domain not in ("", "ai.onnx"):
            continue
        extra = [o for o in node.output[1:] if o]
        if extra and not any(o in used for o in extra):
            del node.output[1:]
            for attr in node.attribute:
                if attr.name == "training_mode":
                    attr.i = 0
            repairs.append(f"{node.name or node.output[0]}: eval graph BatchNormalization in inference form")
    return repairs


def _load_forward(forward: str | Path | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(forward, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(forward)
        return copy
    path = Path(forward)
    if not path.is_file():
        raise no_such_file(path)
    try:
        return onnx.load(str(path))
    except Exception as exc:  # DecodeError, ValueError...
        raise OnnxportError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from None


def generate_training_artifacts(
    forward: str | Path | onnx.ModelProto,
    out_dir: str | Path,
    *,
    trainable: Iterable[str] | None = None,
    frozen: Iterable[str] | None = None,
    loss: str = "crossentropy",
    optimizer: str = "adamw",
    loss_input: str | None = None,
    nominal: bool = False,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    training: TrainingProcess | None = None,
) -> ArtifactsResult:
    """Generate ORT training artifacts into `out_dir`. See the module docstring.

    `training`: a live `TrainingProcess` to reuse (e.g. a test session's); by default one is
    started for this call and stopped after it.
    """
    started = time.perf_counter()
    report = Reporter(progress, cancel)
    if loss not in LOSSES:
        raise OnnxportError(f"unknown loss '{loss}'; choose one of: {', '.join(LOSSES)}")
    if optimizer not in OPTIMIZERS:
        raise OnnxportError(f"unknown optimizer '{optimizer}'; choose one of: {', '.join(OPTIMIZERS)}")
    own_process = training is None
    training = training or TrainingProcess()  # UnavailableError here, before any work, without one
    out_dir = Path(out_dir)
    parent = out_dir.parent if str(out_dir.parent) else Path(".")
    if out_dir.exists() and not out_dir.is_dir():
        raise cannot_write(f"artifacts to {out_dir}", "it is a file")
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise cannot_write(f"artifacts to {out_dir}", f"folder {parent} does not exist or is not writable")
    report.check()
    report(0.02, "reading the forward graph")
    model = _load_forward(forward)
    reads = {} if isinstance(forward, onnx.ModelProto) else model_reads(forward, model)  # a model in memory reads no file
    for name in FILES:  # an existing folder keeps its other files; these are replaced
        check_output(out_dir / name, reads)
    train_names, frozen_names = split_parameters(model, trainable, frozen)
    loss_input = _loss_input(model, loss, loss_input)
    repairs = repair_forward(model)
    notes = _prepare_notes(model, train_names, frozen_names)
    report.check()
    try:
        with AtomicWrite(out_dir) as write:
            tmp = write.new_dir()
            report(0.05, "handing the graph to the training environment")
            generated = _generate(training, model, tmp, train_names, frozen_names, loss, optimizer, loss_input,
                                  nominal, report.sub(0.1, 0.8), cancel)
            report.check()
            report(0.8, "repairing the eval graph")
            eval_path = generated / "eval_model.onnx"
            eval_model = onnx.load(str(eval_path))
            eval_repairs = repair_eval(eval_model)
            if eval_repairs:
                onnx.save(eval_model, str(eval_path))
                repairs += eval_repairs
            report(0.9, "writing")
            report.check()
            report.commit()
            _install(write, generated, out_dir)
    finally:
        if own_process:
            training.close()
    opt_path = out_dir / "optimizer_model.onnx" if OPTIMIZERS[optimizer] else None
    report.finished("artifacts written")
    return ArtifactsResult(out_dir, out_dir / "training_model.onnx", out_dir / "eval_model.onnx", opt_path,
                           out_dir / "checkpoint", train_names, frozen_names, loss, optimizer, loss_input,
                           repairs, notes, time.perf_counter() - started)


def _loss_input(model: onnx.ModelProto, loss: str, given: str | None) -> str | None:
    """The forward output the loss reads: the one named (checked), else the first for a built-in loss."""
    outputs = [o.name for o in model.graph.output]
    if given is not None and given not in outputs:
        raise OnnxportError(f"loss input '{given}' is not an output of the forward graph "
                            f"(outputs: {', '.join(outputs)})")
    if given is None and LOSSES[loss] is not None:
        return outputs[0]
    return given


def _prepare_notes(model: onnx.ModelProto, train_names: list[str], frozen_names: list[str]) -> list[str]:
    """What the user should know about how the forward graph trains; lowers its IR version for
    onnxruntime-training 1.19 (said in a note)."""
    notes = []
    stats = [s for s in running_statistics(model) if s in frozen_names]
    if stats and any(a.name == "training_mode" and a.i for n in model.graph.node
                     if n.op_type == "BatchNormalization" for a in n.attribute):
        notes.append(f"BatchNormalization running statistics ({len(stats)} tensors) are frozen but each training "
                     "step updates them, as PyTorch's train() does (running variance from the biased batch "
                     "variance, where PyTorch uses the unbiased one)")
    unlisted = [c for c in parameter_candidates(model) if c not in set(train_names) | set(frozen_names)]
    if unlisted:
        notes.append(f"{len(unlisted)} float initializer(s) neither trainable nor frozen stay constants "
                     f"of the graphs (e.g. {unlisted[0]})")
    if model.ir_version > TRAINING_MAX_IR:
        notes.append(f"IR version {model.ir_version} lowered to {TRAINING_MAX_IR} for onnxruntime-training 1.19")
        model.ir_version = TRAINING_MAX_IR
    return notes


def _generate(training: TrainingProcess, model: onnx.ModelProto, tmp: Path, trainable: list[str],
              frozen: list[str], loss: str, optimizer: str, loss_input: str | None, nominal: bool,
              report: Reporter, cancel: CancelToken | None) -> Path:
    """Write the forward graph into `tmp`, have the child generate into `tmp/artifacts`."""
    forward = tmp / "forward.onnx"
    big = model.ByteSize() > BIG_MODEL_BYTES
    onnx.save_model(model, str(forward), save_as_external_data=big, location="forward.onnx.data")
    out = tmp / "artifacts"
    out.mkdir()
    training.call("artifacts", {
        "forward": forward, "out_dir": out, "requires_grad": list(trainable), "frozen": list(frozen),
        "loss": LOSSES[loss], "optimizer": OPTIMIZERS[optimizer],
        "loss_input": loss_input, "nominal": nominal,
    }, progress=report, cancel=cancel)
    return out


def _install(write: AtomicWrite, generated: Path, out_dir: Path) -> None:
    """Put the generated files in place: a new folder renamed as a whole, or the files one by one
    into an existing folder (its other files are left alone)."""
    try:
        if not out_dir.exists():
            os.chmod(generated, 0o755)
            write.commit([(generated, out_dir)])
        else:
            write.commit([(generated / n, out_dir / n) for n in FILES if (generated / n).exists()])
    except OSError as exc:
        raise cannot_write(f"artifacts to {out_dir}", exc) from None
