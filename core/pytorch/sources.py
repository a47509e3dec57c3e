"""PyTorch programs as export sources: TorchScript `.pt`, `torch.export` `.pt2`, Hugging Face folders.

Contract: `describe_source(path, task=None, *, trust_code=False) -> SourceInfo` says what the source
is, its inputs (names, dtypes, shapes with dynamic dims, and whether the user must give them) and
its parameters/buffers; `load_program(path, mode=..., task=..., trust_code=False) -> LoadedProgram`
gives the torch module to trace.
TorchScript and `.pt2` files are programs (loading them runs their author's code): refused unless
`trust_code=True` (the CLI's `--trust-model-code`, the app's question). Hugging Face folders are
data and need no trust. Nothing here unpickles outside `weights_only`, trusted or not:
- TorchScript is read by `torch.jit.load`, whose unpickler builds TorchScript types only;
- `.pt2` archives are checked member by member first (pt2_check.py), then `torch.export.load`;
- Hugging Face folders load offline with `trust_remote_code=False`, safetensors first.
torch and transformers are imported lazily; without them `UnavailableError` says what to install.
"""

from __future__ import annotations

import types
from pathlib import Path

from onnxport.core.io.kinds import SourceKind, sniff
from onnxport.core.pytorch.presets import default_task, get_preset, wrap_for_task
from onnxport.core.pytorch.program import (
    DEFAULT_EXAMPLE_DIM,
    DTYPES,
    EXAMPLE_DIM,
    TORCH_HINT,
    InputSpec,
    LoadedProgram,
    ParamInfo,
    SourceInfo,
    import_torch,
    parse_input_spec,
    read_json,
    text_input_specs,
)
from onnxport.core.pytorch.pt2_check import check_pt2_archive
from onnxport.core.pytorch.trust import require_trust
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.logs import held_records, logged_exception
from onnxport.core.util.text import first_line


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
        from onnxport.core.pytorch.hf_folder import describe_hf

        return describe_hf(path, task)
    return load_program(path, trust_code=trust_code).info


def load_program(path: str | Path, *, mode: str = "inference", task: str | None = None,
                 pooling: str | None = None, trust_code: bool = False) -> LoadedProgram:
    """Load the source as a torch module for `mode` ("training" or "inference").

    A TorchScript/.pt2 program is opened only with `trust_code=True` (`UntrustedProgramError`)."""
    path = Path(path)
    kind = program_kind(path)
    require_trust(path, kind, trust_code)
    if kind == SourceKind.HF_FOLDER:
        from onnxport.core.pytorch.hf_folder import load_hf

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
        raise OnnxportError(f"{path}: not a loadable TorchScript model ({first_line(exc)})") from None
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
    with held_records("torch.export") as records:  # it logs a traceback, then raises "see the warnings above"
        try:
            ep = torch.export.load(str(path))  # only after check_pt2_archive: nothing in it unpickles
            module = ep.module()
        except Exception as exc:
            reason = logged_exception(records) or exc
            raise OnnxportError(f"{path}: not a loadable torch.export program ({first_line(reason)})") from None

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


__all__ = ["DTYPES", "InputSpec", "LoadedProgram", "ParamInfo", "SourceInfo", "default_task", "describe_source",
           "example_inputs", "get_preset", "load_program", "parse_input_spec", "shape_text_inputs",
           "wrap_for_task", "DEFAULT_EXAMPLE_DIM", "EXAMPLE_DIM", "TORCH_HINT", "import_torch",
           "read_json", "text_input_specs"]
