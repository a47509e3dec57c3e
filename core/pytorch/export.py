"""PyTorch -> ONNX, in training mode (seed 002) or inference mode with task presets (seed 003).

Contract: `export_torch(source, out_path, mode=..., task=..., opset=..., inputs=..., trust_code=...)`
loads a TorchScript `.pt`, a `.pt2` (programs: only with `trust_code=True`) or a Hugging Face
folder, traces it with torch's TorchScript-based exporter (`dynamo=False`, which honours
`training=TrainingMode.TRAINING`), writes `out_path` atomically; returns a `TorchExportResult`.
- training: parameters exported, no constant folding, Dropout/BatchNorm in training form, opset 16
  by default (LayerNorm decomposed; artifacts.py repairs fused LayerNormalization at >= 17).
- inference: eval mode, constant folding, opset 14 by default, the preset's input/output names and
  dynamic batch/sequence axes. Quantizing it is the workflow's (workflow/torch_import.py).
Before it is put in place it runs in ONNX Runtime at the example shape and another size of each
dynamic axis, held against PyTorch (shape_check.py: refused if it runs only at the traced sizes);
output axes are named after the input axes they follow (output_axes.py).
Initializers are named as the model's state_dict (the Hugging Face wrapper's `model.` dropped).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import onnx

from onnxport.core.export.staging import Staging
from onnxport.core.export.writer import check_destination
from onnxport.core.graph.eval_mode import to_inference_form
from onnxport.core.graph.passes import REMOVED, REWRITTEN
from onnxport.core.pytorch.output_axes import follow_axes
from onnxport.core.pytorch.shape_check import BakedAxesError, ExampleShapeError, check_export, declared_axes
from onnxport.core.pytorch.sources import (
    InputSpec,
    LoadedProgram,
    example_inputs,
    import_torch,
    load_program,
    program_kind,
    shape_text_inputs,
)
from onnxport.core.pytorch.trust import require_trust
from onnxport.core.util.atomic import AtomicWrite
from onnxport.core.util.errors import OnnxportError, cannot_write
from onnxport.core.util.out_paths import check_output
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter
from onnxport.core.util.text import first_line

MODES = ("training", "inference")
DEFAULT_OPSET = {"training": 16, "inference": 14}
OPSET_RANGE = {"training": (14, 20), "inference": (11, 20)}  # torch's TorchScript exporter stops at 20
PROTOBUF_LIMIT = 2**31 - 1


@dataclass
class TorchExportResult:
    path: Path
    mode: str
    task: str | None
    opset: int
    inputs: list[str]
    outputs: list[str]
    dynamic_axes: dict[str, dict[int, str]]
    parameters: list[str]  # float initializers (trainable candidates), named as the state_dict
    max_abs_diff: float | None = None  # ORT vs PyTorch at the example shape and other sizes (inference mode)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"path": str(self.path), "mode": self.mode, "task": self.task, "opset": self.opset,
                "inputs": self.inputs, "outputs": self.outputs,
                "dynamic_axes": {k: {str(a): n for a, n in v.items()} for k, v in self.dynamic_axes.items()},
                "parameters": len(self.parameters),
                "max_abs_diff": self.max_abs_diff, "notes": self.notes, "seconds": round(self.seconds, 3)}


def resolve_opset(mode: str, opset: int | None) -> int:
    if mode not in MODES:
        raise OnnxportError(f"mode must be one of: {', '.join(MODES)} (got '{mode}')")
    value = DEFAULT_OPSET[mode] if opset is None else int(opset)
    low, high = OPSET_RANGE[mode]
    if not low <= value <= high:
        raise OnnxportError(f"opset {value} is outside what {mode}-mode export supports here ({low}..{high})")
    return value


def export_torch(
    source: str | Path,
    out_path: str | Path,
    *,
    mode: str = "inference",
    task: str | None = None,
    opset: int | None = None,
    inputs: list[InputSpec] | None = None,
    output_names: list[str] | None = None,
    pooling: str | None = None,  # pooling task: "mean"/"cls" (default: the folder's sentence-transformers mode, else mean)
    verify: bool = True,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    trust_code: bool = False,
) -> TorchExportResult:
    """Export a PyTorch source to ONNX at `out_path`. See the module docstring.

    `trust_code=True` allows a TorchScript/.pt2 program to run (it executes its author's code)."""
    started = time.perf_counter()
    report = Reporter(progress, cancel)
    opset = resolve_opset(mode, opset)
    require_trust(source, program_kind(source), trust_code)  # before any progress is shown
    out_path = Path(out_path)
    check_destination(out_path)
    reads = {Path(source): "the source this run reads"}  # a folder: every file in it
    check_output(out_path, reads)
    torch = import_torch()
    report.check()
    report(0.02, f"loading {Path(source).name}")
    program = load_program(source, mode=mode, task=task, pooling=pooling, trust_code=trust_code)
    specs = _input_specs(program, inputs)
    names = [s.name for s in specs]
    examples = _examples(program, specs, seed=0)
    module = program.module
    before = _snapshot(module)
    module.train(mode == "training")
    outputs = list(output_names or (program.preset.outputs if program.preset else program.info.outputs))
    try:
        axes = _dynamic_axes(program, specs, outputs, module, examples, torch)
    finally:
        _restore(torch, module, before)
    notes = list(program.notes)
    report.check()
    report(0.2, "tracing and converting to ONNX")
    compare = verify and mode == "inference"  # values held against PyTorch's (shapes always, unless --no-verify)
    scratch = AtomicWrite(out_path).start()  # the tracer's work folder: a temp like any other
    tmpdir = scratch.new_dir()
    try:
        traced = tmpdir / "model.onnx"
        _trace(torch, module, examples, traced, mode, opset, names, outputs, axes, program, before)
        report.check()
        report(0.6, "writing")
        model = onnx.load(str(traced))
        _restore_initializers(model.graph, before, torch)
        if program.prefix:
            strip_prefix(model.graph, program.prefix)
        compare = _finish_graph(model, program, mode, names, notes) and compare
        checked: list[float | None] = []

        def check(staged: Path) -> None:  # before the model is put in place: a refusal leaves nothing
            report(0.75, "checking in ONNX Runtime at the example shape and other sizes")
            checked.append(_check(torch, program, specs, module, before, staged, mode, verify, compare, notes))

        save_atomic(model, out_path, report, check)
        result = _result(model, out_path, mode, program, opset, axes, notes, checked[0] if checked else None)
        del model
    finally:
        scratch.discard()
    result.seconds = time.perf_counter() - started
    report.finished("exported")
    return result


def _finish_graph(model: onnx.ModelProto, program: LoadedProgram, mode: str, names: list[str],
                  notes: list[str]) -> bool:
    """The traced graph in the form `mode` asks for, annotated; notes say what changed. Returns
    False when its values cannot be compared with PyTorch's (a .pt2 captured in train() mode)."""
    comparable = True
    if mode == "inference" and program.captured_training:
        changed = to_inference_form(model).names(REMOVED, REWRITTEN)
        notes.append(f"the .pt2 program was captured in train() mode: {len(changed)} Dropout/BatchNorm "
                     "node(s) put in inference form; not compared with PyTorch, which computes training-mode "
                     "results for it")
        comparable = False
    elif mode == "training" and program.captured_training is False:
        notes.append("the .pt2 program was captured in eval() mode: its graph has no training-mode "
                     "Dropout/BatchNorm (torch.export the model in train() mode for that)")
    _annotate(model, program, mode)
    missing = [n for n in names if n not in {i.name for i in model.graph.input}]
    if missing:
        notes.append(f"the model does not use input(s) {', '.join(missing)}: the exporter dropped them")
    return comparable


def _result(model: onnx.ModelProto, out_path: Path, mode: str, program: LoadedProgram, opset: int,
            axes, notes: list[str], max_abs_diff: float | None) -> TorchExportResult:
    """What was written: inputs (parameters aside), outputs, dynamic axes, floating-point parameters."""
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE)
    params = [t.name for t in model.graph.initializer if t.data_type in floats]
    return TorchExportResult(out_path, mode, program.preset.name if program.preset else None, opset,
                             [i.name for i in model.graph.input if i.name not in set(params)],
                             [o.name for o in model.graph.output], axes, params, notes=notes,
                             max_abs_diff=max_abs_diff)


def _input_specs(program: LoadedProgram, given: list[InputSpec] | None) -> list[InputSpec]:
    info = program.info
    if given:
        return list(given)
    if not info.inputs_known:
        hint = " ".join(f"--input {s.name}:float32:batch,..." for s in info.inputs) or "--input x:float32:batch,4"
        raise OnnxportError(f"{info.path}: a {info.kind.value} file does not record its inputs' dtypes and shapes; "
                            "give them", hint=hint)
    return list(info.inputs)


def _sizes(program: LoadedProgram, specs: list[InputSpec]) -> dict[str, int]:
    """The example size of every dynamic dim name of `specs`."""
    sizes = dict(program.info.example_sizes)
    for spec in specs:
        for d in spec.shape:
            if isinstance(d, str) and d not in sizes:
                sizes[d] = {"batch": 2, "sequence": 8}.get(d, 2)
    return {d: sizes[d] for spec in specs for d in spec.shape if isinstance(d, str)}


def _examples(program: LoadedProgram, specs: list[InputSpec], seed: int, sizes: dict[str, int] | None = None) -> tuple:
    tensors = example_inputs(specs, {**_sizes(program, specs), **(sizes or {})}, seed)
    return shape_text_inputs(tensors, specs) if program.preset is not None else tensors


def _forward(torch, module, examples: tuple) -> list:
    """The module's output tensors in eval mode (flattened), without gradients or warnings."""
    module.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = module(*examples)
    return [result] if isinstance(result, torch.Tensor) else [
        t for t in torch.utils._pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]


def _dynamic_axes(program, specs, outputs, module, examples, torch) -> dict[str, dict[int, str]]:
    """Inputs: their specs' named dims; outputs: the preset's, or named after the input dims they follow."""
    if program.preset is not None:
        return program.preset.dynamic_axes([s.name for s in specs])
    axes = {s.name: s.dynamic_axes() for s in specs if s.dynamic_axes()}
    sizes = _sizes(program, specs)
    if not sizes:
        return axes
    try:
        base = _forward(torch, module, examples)
    except Exception as exc:
        raise OnnxportError(f"{program.info.path}: the model fails on example inputs "
                            f"{', '.join(s.text() for s in specs)} ({first_line(exc)})") from None

    def forward(at: dict[str, int]) -> list | None:
        try:
            return _forward(torch, module, _examples(program, specs, 0, at))
        except Exception:  # noqa: BLE001 - a size the model cannot take: that name is not followed
            return None

    axes.update(follow_axes(forward, sizes, base, outputs))
    return axes


def _check(torch, program, specs, module, before, staged: Path, mode: str, verify: bool, compare: bool,
           notes: list[str]) -> float | None:
    """shape_check on the staged model: the example shape and one more size of each declared dim."""
    import numpy as np

    sizes = _sizes(program, specs)
    model = onnx.load(str(staged), load_external_data=False)
    declared = {name: sizes[name] for name in declared_axes(model) if name in sizes}
    del model

    def feeds_at(at: dict[str, int]) -> dict[str, np.ndarray]:
        return {s.name: t.numpy() for s, t in zip(specs, _examples(program, specs, 0, at))}

    def torch_at(at: dict[str, int]) -> list[np.ndarray] | None:
        try:
            return [t.detach().float().numpy() if t.is_floating_point() else t.detach().numpy()
                    for t in _forward(torch, module, _examples(program, specs, 0, at))]
        except Exception:  # noqa: BLE001 - sizes PyTorch cannot run: nothing to hold ORT against
            return None
        finally:
            _restore(torch, module, before)

    try:
        return check_export(staged, declared, feeds_at, torch_at if verify else None, compare)
    except BakedAxesError as exc:
        fixed = [replace(s, shape=tuple(sizes[d] if d in exc.baked else d for d in s.shape)) for s in specs]
        raise OnnxportError(str(exc), hint="the exporter traced those sizes into the graph; to write the model with "
                            "them fixed: " + " ".join(f"--input {s.text()}" for s in fixed)) from None
    except ExampleShapeError as exc:
        if mode != "training":
            raise
        notes.append(f"not checked in ONNX Runtime: {exc.one_line()}")  # e.g. BatchNorm's training form
        return None


def _snapshot(module) -> dict:
    return {name: buf.detach().clone() for name, buf in module.named_buffers()}


def _restore(torch, module, before: dict) -> None:
    """Put buffers back: running a training-mode forward (tracing does) updates BatchNorm's
    running statistics in place from the random example inputs, and a .pt2 program captured in
    train() mode does so whatever mode it is asked for."""
    with torch.no_grad():
        for name, buf in module.named_buffers():
            if name in before:
                buf.copy_(before[name])


def _trace(torch, module, examples, path, mode, opset, names, outputs, axes, program, before: dict) -> None:
    """torch.onnx.export; the buffers are restored afterwards (see `_restore`)."""
    training = torch.onnx.TrainingMode.TRAINING if mode == "training" else torch.onnx.TrainingMode.EVAL
    module.train(mode == "training")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, examples, str(path), dynamo=False, export_params=True,
                              do_constant_folding=mode == "inference", training=training, opset_version=opset,
                              input_names=names, output_names=outputs, dynamic_axes=axes or None)
    except Exception as exc:
        raise OnnxportError(f"{program.info.path}: torch.onnx.export failed at opset {opset} "
                            f"({type(exc).__name__}: {first_line(exc)})") from None
    finally:
        _restore(torch, module, before)


def _restore_initializers(graph: onnx.GraphProto, before: dict, torch) -> None:
    """Initializers named like a buffer get its value from before any forward ran (the exporter
    serializes buffers after tracing, i.e. after the training-mode forward updated them)."""
    from onnx import numpy_helper

    from onnxport.core.io.param_files import tensor_to_numpy

    for i, t in enumerate(graph.initializer):
        value = before.get(t.name)
        if value is None or tuple(value.shape) != tuple(t.dims) or t.data_type != onnx.TensorProto.FLOAT \
                or value.dtype != torch.float32:
            continue
        graph.initializer[i].CopyFrom(numpy_helper.from_array(tensor_to_numpy(value, torch), t.name))


def strip_prefix(graph: onnx.GraphProto, prefix: str) -> None:
    """Remove a wrapper's `prefix` from names: values "model.x" -> "x", node scopes "/model/a" -> "/a".

    A name is renamed only when its new name is not taken (by a value or a node of the wrapper).
    """
    scope = "/" + prefix.rstrip(".") + "/"
    values = {t.name for t in graph.initializer} | {i.name for i in graph.input} | {
        o for n in graph.node for o in n.output}
    nodes = {n.name for n in graph.node}
    io = {i.name for i in graph.input} | {o.name for o in graph.output}

    def stripped(name: str) -> str | None:
        if name.startswith(prefix):
            return name[len(prefix):]
        if name.startswith(scope):
            return "/" + name[len(scope):]
        return None

    value_map = {n: new for n in values - io if (new := stripped(n)) and new not in values}
    node_map = {n: new for n in nodes if (new := stripped(n)) and new not in nodes}
    for t in graph.initializer:
        t.name = value_map.get(t.name, t.name)
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        vi.name = value_map.get(vi.name, vi.name)
    for node in graph.node:
        node.input[:] = [value_map.get(n, n) for n in node.input]
        node.output[:] = [value_map.get(n, n) for n in node.output]
        node.name = node_map.get(node.name, node.name)


def _annotate(model: onnx.ModelProto, program: LoadedProgram, mode: str) -> None:
    entries = {"onnxport.torch_source": program.info.path.name, "onnxport.mode": mode}
    if program.preset is not None:
        entries["onnxport.task"] = program.preset.name
    for key, value in entries.items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value


def save_atomic(model: onnx.ModelProto, out_path: Path, report: Reporter | None = None,
                check: Callable[[Path], None] | None = None) -> None:
    """Write `model` to `out_path` through a staging folder, committed with `report`'s commit
    point (over 2 GB: external data in a file named for this run, in place before the model);
    `check(staged)` runs on the written file before that and may refuse it (nothing is put in place)."""
    with Staging(out_path) as stage:
        staged = stage.path(out_path.name)
        data_files = []
        try:
            if model.ByteSize() > PROTOBUF_LIMIT - (64 << 20):
                data_files = [stage.data_name]
                onnx.save_model(model, str(staged), save_as_external_data=True, all_tensors_to_one_file=True,
                                location=stage.data_name, size_threshold=1024)
            else:
                onnx.save_model(model, str(staged))
        except OSError as exc:
            raise cannot_write(out_path, exc) from None
        if check is not None:
            check(staged)
        stage.commit(staged, report, data_files=data_files)
