"""What every PyTorch source is made of: input specs, the description of a source, a loaded
program, and the guarded ways torch and its files are opened. Shared by `sources` (TorchScript,
`.pt2`) and `hf_folder` (Hugging Face folders), which both build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from onnxport.core.io.kinds import SourceKind
from onnxport.core.pytorch.presets import TEXT_INPUTS, TaskPreset
from onnxport.core.util import json_files
from onnxport.core.util.budgets import JSON_FILE_MAX
from onnxport.core.util.errors import OnnxportError, UnavailableError

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



def text_input_specs(names: list[str], vocab_size: int | None, type_vocab_size: int | None) -> list[InputSpec]:
    highs = {"input_ids": vocab_size or 100, "attention_mask": 2, "token_type_ids": type_vocab_size or 2}
    return [InputSpec(n, "int64", ("batch", "sequence"), highs.get(n, 2)) for n in names if n in TEXT_INPUTS]


def read_json(path: Path) -> dict:
    """A JSON object from a model folder's file, its size and nesting bounded (util/json_files.py)."""
    data = json_files.read_json(path, JSON_FILE_MAX)
    if not isinstance(data, dict):
        raise OnnxportError(f"{path}: expected a JSON object")
    return data
