"""PyTorch programs as export sources: TorchScript `.pt`, `torch.export` `.pt2`, Hugging Face folders.

Contract: `describe_source(path, task=None, *, trust_code=False) -> SourceInfo` says what the
source is, which inputs it takes (names, dtypes, shapes with dynamic dims, and whether the source
really knows them or the user must say), and which parameters/buffers it holds (for the
trainable/frozen choice). `load_program(path, mode=..., task=..., trust_code=False) -> LoadedProgram`
gives the torch module to trace.

TorchScript and `.pt2` files are programs: loading and running them executes their author's code,
so both functions refuse them unless `trust_code=True` (program_trust.py); the CLI's
`--trust-model-code` and the app's question set it. Hugging Face folders are data and need no trust.
Nothing here unpickles outside `weights_only`, trusted or not:
- TorchScript is read by `torch.jit.load`, whose unpickler builds TorchScript types only;
- `.pt2` archives are checked member by member before torch opens them (pt2_archive_check.py:
  any pickled object, wherever it sits, is refused), then read by `torch.export.load` with every
  `torch.load` forced to `weights_only=True` (TORCH_FORCE_WEIGHTS_ONLY_LOAD) as a second guard;
- Hugging Face folders load offline (`local_files_only=True`, HF_HUB_OFFLINE=1) with
  `trust_remote_code=False`, from safetensors when present (`.bin` weights also weights-only).
torch and transformers are imported lazily; without them `UnavailableError` says what to install.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path

from .errors import OnnxportError, UnavailableError
from .presets import TEXT_INPUTS, TaskPreset, default_task, get_preset, wrap_for_task
from .program_trust import require_trust
from .pt2_archive_check import check_pt2_archive
from .sources import SourceKind, sniff

TORCH_HINT = "needs torch: pip install 'onnxport[torch]'"
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool")
EXAMPLE_DIM = {"batch": 2, "sequence": 8}  # example sizes for dynamic dims when the source has none
DEFAULT_EXAMPLE_DIM = 2


@dataclass
class InputSpec:
    """One model input: name, dtype name, shape (an int is fixed, a str names a dynamic dim)."""

    name: str
    dtype: str = "float32"
    shape: tuple[int | str, ...] = ()
    high: int | None = None  # integer inputs: example values are drawn from [0, high)

    def dynamic_axes(self) -> dict[int, str]:
        return {i: d for i, d in enumerate(self.shape) if isinstance(d, str)}

    def text(self) -> str:
        """`name:dtype:d0,d1` (the CLI's --input syntax)."""
        return f"{self.name}:{self.dtype}:{','.join(str(d) for d in self.shape)}"


def parse_input_spec(text: str) -> InputSpec:
    """Parse `name:dtype:dims` (dims comma-separated; a non-number is a dynamic dim's name)."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[0].strip():
        raise OnnxportError(f"input spec '{text}': expected NAME:DTYPE:DIMS, e.g. x:float32:batch,4")
    name, dtype, dims = (p.strip() for p in parts)
    if dtype not in DTYPES:
        raise OnnxportError(f"input spec '{text}': unknown dtype '{dtype}'; choose one of: {', '.join(DTYPES)}")
    shape: list[int | str] = []
    for d in (x.strip() for x in dims.split(",") if x.strip()):
        if d.isdigit():
            if int(d) == 0:
                raise OnnxportError(f"input spec '{text}': a dimension of 0")
            shape.append(int(d))
        elif d.isidentifier():
            shape.append(d)
        else:
            raise OnnxportError(f"input spec '{text}': dimension '{d}' is neither a number nor a name")
    return InputSpec(name, dtype, tuple(shape))


@dataclass
class ParamInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    is_buffer: bool = False

    @property
    def trainable_default(self) -> bool:
        return not self.is_buffer and self.dtype.startswith(("float", "bfloat"))

    @property
    def frozen_default(self) -> bool:
        return self.is_buffer and self.dtype.startswith(("float", "bfloat"))


@dataclass
class SourceInfo:
    path: Path
    kind: SourceKind
    inputs: list[InputSpec]
    inputs_known: bool  # False: names at best; the user must give dtypes/shapes
    outputs: list[str]
    parameters: list[ParamInfo]
    task: str | None = None  # Hugging Face: the preset the parameters were listed for
    tasks: tuple[str, ...] = ()  # Hugging Face: the presets it supports
    notes: list[str] = field(default_factory=list)
    example_sizes: dict[str, int] = field(default_factory=dict)  # dynamic dim -> size the source was traced with

    @property
    def is_hf(self) -> bool:
        return self.kind == SourceKind.HF_FOLDER


@dataclass
class LoadedProgram:
    """A module ready for torch.onnx.export, with what the source says about its inputs/outputs."""

    module: object  # torch.nn.Module
    info: SourceInfo
    preset: TaskPreset | None = None
    prefix: str = ""  # wrapper prefix to strip from exported initializer names
    notes: list[str] = field(default_factory=list)
    captured_training: bool | None = None  # .pt2: was the program captured in train() mode?


def import_torch():
    try:
        import torch
    except ImportError:
        raise UnavailableError(f"PyTorch sources {TORCH_HINT}") from None
    return torch


_FORCE_LOCK = threading.Lock()


@contextlib.contextmanager
def weights_only_loads():
    """Every torch.load inside runs with weights_only=True, whatever the caller asked."""
    with _FORCE_LOCK:
        old = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
        os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("TORCH_FORCE_WEIGHTS_ONLY_LOAD", None)
            else:
                os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = old


def program_kind(path: str | Path) -> SourceKind:
    kind = sniff(path)
    if kind not in (SourceKind.TORCHSCRIPT, SourceKind.TORCH_EXPORT, SourceKind.HF_FOLDER):
        raise OnnxportError(f"{path}: not a TorchScript .pt, torch.export .pt2 or Hugging Face model folder "
                            f"(looks like: {kind.value})")
    return kind


def describe_source(path: str | Path, task: str | None = None, *, trust_code: bool = False) -> SourceInfo:
    """What the source is, its inputs and parameters (loads a trusted TorchScript/.pt2; HF: config only)."""
    path = Path(path)
    kind = program_kind(path)
    if kind == SourceKind.HF_FOLDER:
        from .hf_source import describe_hf

        return describe_hf(path, task)
    return load_program(path, trust_code=trust_code).info


def load_program(path: str | Path, *, mode: str = "inference", task: str | None = None,
                 pooling: str = "mean", trust_code: bool = False) -> LoadedProgram:
    """Load the source as a torch module for `mode` ("training" or "inference").

    A TorchScript/.pt2 program is opened only with `trust_code=True` (`UntrustedProgramError`)."""
    path = Path(path)
    kind = program_kind(path)
    require_trust(path, kind, trust_code)
    if kind == SourceKind.HF_FOLDER:
        from .hf_source import load_hf

        return load_hf(path, mode=mode, task=task, pooling=pooling)
    if task not in (None, "", "none"):
        raise OnnxportError(f"{path}: task presets apply to Hugging Face model folders only; "
                            "a TorchScript/.pt2 model is exported with the outputs it has")
    if kind == SourceKind.TORCHSCRIPT:
        return _load_torchscript(path)
    return _load_pt2(path)


def _param_infos(module) -> list[ParamInfo]:
    params = [ParamInfo(n, tuple(p.shape), str(p.dtype).replace("torch.", "")) for n, p in module.named_parameters()]
    buffers = [ParamInfo(n, tuple(b.shape), str(b.dtype).replace("torch.", ""), True)
               for n, b in module.named_buffers()]
    return params + buffers


def _load_torchscript(path: Path) -> LoadedProgram:
    torch = import_torch()
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:  # RuntimeError mostly; torch.jit raises several kinds
        raise OnnxportError(f"{path}: not a loadable TorchScript model ({_first_line(exc)})") from None
    inputs: list[InputSpec] = []
    try:
        arguments = module.forward.schema.arguments[1:]
    except (AttributeError, RuntimeError):
        arguments = []
    for arg in arguments:
        dtype = "int64" if str(arg.type) == "int" else "float32"
        inputs.append(InputSpec(arg.name, dtype, ("batch",)))
    info = SourceInfo(path, SourceKind.TORCHSCRIPT, inputs, False, ["output"], _param_infos(module),
                      notes=["a TorchScript file records input names but not their dtypes/shapes: check them"])
    return LoadedProgram(module, info)


def _load_pt2(path: Path) -> LoadedProgram:
    torch = import_torch()
    check_pt2_archive(path, torch)
    try:
        with weights_only_loads():
            ep = torch.export.load(str(path))
        module = ep.module()
    except Exception as exc:
        raise OnnxportError(f"{path}: not a loadable torch.export program ({_first_line(exc)})") from None

    # An ExportedProgram's train/eval behaviour was fixed when it was captured; its module()
    # refuses train()/eval(). The exporter calls them, so make them only set the flag.
    def set_mode(self, mode: bool = True):
        self.training = mode
        return self

    module.train = types.MethodType(set_mode, module)
    module.eval = types.MethodType(lambda self: set_mode(self, False), module)
    inputs, sizes = _pt2_inputs(ep)
    outputs = list(ep.graph_signature.user_outputs)
    out_names = ["output"] if len(outputs) == 1 else [f"output_{i}" for i in range(len(outputs))]
    training = captured_in_training_mode(ep)
    note = {True: "captured in train() mode: Dropout/BatchNorm compute their training form",
            False: "captured in eval() mode: no training-mode Dropout/BatchNorm in this program",
            None: "a .pt2 program keeps the train/eval behaviour it was captured with"}[training]
    info = SourceInfo(path, SourceKind.TORCH_EXPORT, inputs, True, out_names, _param_infos(module),
                      notes=[note], example_sizes=sizes)
    return LoadedProgram(module, info, captured_training=training)


# aten op -> index of its `train`/`training` argument
_MODE_ARGS = {"aten.dropout.default": 2, "aten.native_dropout.default": 2, "aten.batch_norm.default": 5,
              "aten._native_batch_norm_legit_functional.default": 5, "aten._native_batch_norm_legit.default": 5,
              "aten.native_batch_norm.default": 5}


def captured_in_training_mode(ep) -> bool | None:
    """True/False if the program's Dropout/BatchNorm ops say train/eval; None if it has none."""
    modes = []
    for node in ep.graph.nodes:
        index = _MODE_ARGS.get(str(node.target)) if node.op == "call_function" else None
        if index is not None and len(node.args) > index and isinstance(node.args[index], bool):
            modes.append(node.args[index])
    return any(modes) if modes else None


def _pt2_inputs(ep) -> tuple[list[InputSpec], dict[str, int]]:
    torch = import_torch()
    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    examples = []
    if getattr(ep, "example_inputs", None):
        examples = list(torch.utils._pytree.tree_leaves(ep.example_inputs))
    symbols: dict[str, str] = {}
    sizes: dict[str, int] = {}
    specs = []
    for i, name in enumerate(user):
        val = placeholders[name].meta.get("val") if name in placeholders else None
        if val is None or not hasattr(val, "shape"):
            specs.append(InputSpec(name, "float32", ()))
            continue
        example = examples[i] if i < len(examples) and hasattr(examples[i], "shape") else None
        shape: list[int | str] = []
        for axis, d in enumerate(val.shape):
            if isinstance(d, int):
                shape.append(d)
                continue
            sym = str(d)
            if sym not in symbols:
                symbols[sym] = "batch" if axis == 0 and "batch" not in symbols.values() else f"dim_{sym}"
                if example is not None:
                    sizes[symbols[sym]] = int(example.shape[axis])
            shape.append(symbols[sym])
        specs.append(InputSpec(name, str(val.dtype).replace("torch.", ""), tuple(shape)))
    return specs, sizes


def example_inputs(specs: list[InputSpec], sizes: dict[str, int] | None = None, seed: int = 0) -> tuple:
    """Random example tensors for `specs` (dynamic dims get example sizes, at least 2)."""
    torch = import_torch()
    gen = torch.Generator().manual_seed(seed)
    tensors = []
    for spec in specs:
        shape = []
        for d in spec.shape:
            if isinstance(d, int):
                shape.append(d)
            else:
                size = (sizes or {}).get(d) or EXAMPLE_DIM.get(d, DEFAULT_EXAMPLE_DIM)
                shape.append(max(2, size))
        dtype = getattr(torch, spec.dtype)
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=gen).to(dtype)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=gen).to(torch.bool)
        else:
            t = torch.randint(0, spec.high or 2, shape, generator=gen).to(dtype)
        tensors.append(t)
    return tuple(tensors)


def shape_text_inputs(tensors: tuple, specs: list[InputSpec]) -> tuple:
    """Make random text inputs look like a tokenizer's: a padded attention mask, two segments."""
    for spec, t in zip(specs, tensors):
        if spec.name == "attention_mask" and t.dim() == 2:
            t.fill_(1)
            if t.shape[0] > 1:
                t[-1, t.shape[1] // 2:] = 0  # the last row is padded
        elif spec.name == "token_type_ids" and t.dim() == 2:
            t.zero_()
            if (spec.high or 2) > 1:
                t[:, t.shape[1] // 2:] = 1
    return tensors


def text_input_specs(names: list[str], vocab_size: int | None, type_vocab_size: int | None) -> list[InputSpec]:
    highs = {"input_ids": vocab_size or 100, "attention_mask": 2, "token_type_ids": type_vocab_size or 2}
    return [InputSpec(n, "int64", ("batch", "sequence"), highs.get(n, 2)) for n in names if n in TEXT_INPUTS]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise OnnxportError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise OnnxportError(f"{path}: expected a JSON object")
    return data


__all__ = ["DTYPES", "InputSpec", "LoadedProgram", "ParamInfo", "SourceInfo", "default_task", "describe_source",
           "example_inputs", "get_preset", "load_program", "parse_input_spec", "shape_text_inputs",
           "wrap_for_task", "weights_only_loads"]
