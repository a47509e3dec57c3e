"""What kind of file (or folder) is this? Content (magic bytes) first, the name second.

The user never picks a file type by hand: every front end and reader asks `sniff`.
"""

from __future__ import annotations

import zipfile
from enum import Enum
from pathlib import Path

from onnxport.core.io.archive_bounds import ZIP_ERRORS, check_member_count
from onnxport.core.io.regular_files import regular_file
from onnxport.core.util.errors import cannot_read


class SourceKind(str, Enum):
    ONNX = "onnx"
    ORT_CHECKPOINT = "ort-checkpoint"  # flatbuffer, identifier ODTC
    ORT_CHECKPOINT_LEGACY = "ort-checkpoint-legacy"  # folder of *.pbseq
    CHECKPOINT_DATA = "checkpoint-data"  # <checkpoint>.data sidecar, read with its checkpoint
    NPZ = "npz"
    SAFETENSORS = "safetensors"
    TORCH_STATE_DICT = "torch-state-dict"  # .pt/.pth zip holding tensors only
    TORCHSCRIPT = "torchscript"
    TORCH_EXPORT = "torch-export"  # .pt2
    HF_FOLDER = "hf-folder"
    UNKNOWN = "unknown"


PARAMETER_KINDS = {
    SourceKind.ORT_CHECKPOINT,
    SourceKind.ORT_CHECKPOINT_LEGACY,
    SourceKind.NPZ,
    SourceKind.SAFETENSORS,
    SourceKind.TORCH_STATE_DICT,
}
# Program-like sources that need the PyTorch import flow before they become an ONNX graph.
TORCH_PROGRAM_KINDS = {SourceKind.TORCHSCRIPT, SourceKind.TORCH_EXPORT, SourceKind.HF_FOLDER}


def sniff(path: str | Path) -> SourceKind:
    """The kind of file or folder at `path`, from its content first and its name second."""
    path = Path(path)
    if path.is_dir():
        if any(path.glob("*.pbseq")):
            return SourceKind.ORT_CHECKPOINT_LEGACY
        if (path / "config.json").exists():
            return SourceKind.HF_FOLDER
        return SourceKind.UNKNOWN
    regular_file(path)  # a named pipe would block open() for good
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise cannot_read(path, exc) from None
    if len(head) >= 8 and head[4:8] == b"ODTC":
        return SourceKind.ORT_CHECKPOINT
    if path.suffix == ".pbseq":  # one file of the older checkpoint folder: the folder is meant
        return SourceKind.ORT_CHECKPOINT_LEGACY
    if path.suffix == ".data" and Path(str(path)[: -len(".data")]).is_file():
        return SourceKind.CHECKPOINT_DATA
    if head.startswith(b"PK"):
        return _sniff_zip(path)
    if len(head) >= 9 and head[8:9] == b"{" and path.suffix == ".safetensors":
        return SourceKind.SAFETENSORS
    if path.suffix == ".safetensors":
        return SourceKind.SAFETENSORS
    if path.suffix == ".onnx" or _looks_like_onnx(head):
        return SourceKind.ONNX
    return SourceKind.UNKNOWN


def _looks_like_onnx(head: bytes) -> bool:
    # ModelProto usually starts with ir_version (field 1, varint): tag 0x08.
    return len(head) >= 2 and head[0] == 0x08 and head[1] < 0x20


def _sniff_zip(path: Path) -> SourceKind:
    check_member_count(path, "zip archive")  # before zipfile lists every member
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except ZIP_ERRORS:  # not a zip after all, or a broken one (its reader then says why)
        return SourceKind.UNKNOWN
    if names and all(n.endswith(".npy") for n in names):
        return SourceKind.NPZ
    if any(n.endswith(("/archive_format", "archive_format")) for n in names) or path.suffix == ".pt2":
        return SourceKind.TORCH_EXPORT
    if any(n.endswith("/constants.pkl") or n.endswith("/code/__torch__.py") for n in names) or any(
        "/code/" in n for n in names
    ):
        return SourceKind.TORCHSCRIPT
    if any(n.endswith("data.pkl") for n in names):
        return SourceKind.TORCH_STATE_DICT
    return SourceKind.UNKNOWN


_NOT_A_MODEL = {
    SourceKind.ORT_CHECKPOINT: "a training checkpoint",
    SourceKind.ORT_CHECKPOINT_LEGACY: "a training checkpoint",
    SourceKind.CHECKPOINT_DATA: "a checkpoint's data file",
    SourceKind.NPZ: "a parameter file (.npz)",
    SourceKind.SAFETENSORS: "a parameter file (safetensors)",
    SourceKind.TORCH_STATE_DICT: "a PyTorch state_dict",
}


def not_a_model(path: str | Path) -> str | None:
    """Where `path` is not an ONNX model but a file another option takes, the one line that says
    so (`PATH is a training checkpoint, not a model: pass it with --checkpoint`); else None."""
    try:
        kind = sniff(path)
    except Exception:  # noqa: BLE001 - only advice: the caller's own error stands
        return None
    if kind in _NOT_A_MODEL:
        return f"{path} is {_NOT_A_MODEL[kind]}, not a model: pass it with --checkpoint, beside the model"
    if kind in TORCH_PROGRAM_KINDS:
        return f"{path} is a PyTorch program, not an ONNX model: turn it into one with 'onnxport torch-export'"
    return None
