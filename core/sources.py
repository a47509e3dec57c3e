"""What did the user give us? Sniff file kinds and open a set of files as one job's sources.

The user never picks a file type by hand: `sniff` looks at content (magic bytes) first and the
name second. `open_sources` takes any mix of files and folders (a training-artifacts folder, an
eval model plus checkpoints, the graphs ORTModule saved plus a state_dict...) and returns the
model, its index, the merged parameters and how they match. Parameters named the PyTorch way
(a state_dict of the bare module, DDP's `module.`...) are renamed onto the graph's names when one
prefix swap makes more of them fit (`name_alignment`); what was done is kept in `alignment`.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import onnx

from .archive_bounds import ZIP_ERRORS
from .errors import OnnxportError
from .index import TensorIndex, build_index
from .match import ParamMatch, match_parameters
from .model_io import load_graph
from .name_alignment import NameAlignment, align_if_better
from .ortmodule_files import OrtModuleFiles, group_files, several_models_error
from .params import ParameterSet, merge_parameter_sets
from .progress import CancelToken, ProgressFn, Reporter
from .regular_files import regular_file


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
        raise OnnxportError(f"{path}: cannot read ({exc.strerror or exc})") from None
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


# Readers for parameter files: kind -> callable(path) -> ParameterSet. Modules that add a
# format register here (checkpoint.py, param_files.py).
ParamReader = Callable[[Path], ParameterSet]
PARAM_READERS: dict[SourceKind, ParamReader] = {}


def read_parameters(path: str | Path, kind: SourceKind | None = None) -> ParameterSet:
    """Read any supported parameter file (checkpoint, state_dict, safetensors, npz)."""
    path = Path(path)
    kind = kind or sniff(path)
    _load_readers()
    reader = PARAM_READERS.get(kind)
    if reader is None:
        raise OnnxportError(f"{path}: not a parameter file onnxport can read (looks like: {kind.value})")
    return reader(path)


def _load_readers() -> None:
    # Import for their registration side effect; kept lazy so `sources` has no import cycle.
    from . import checkpoint  # noqa: F401

    try:
        from . import param_files  # noqa: F401
    except ImportError:
        pass


@dataclass
class LoadedSources:
    """One job's inputs: a model (optional), its index, merged parameters and their match."""

    model_path: Path | None = None
    model: onnx.ModelProto | None = None
    index: TensorIndex | None = None
    params: ParameterSet | None = None
    param_paths: list[Path] = field(default_factory=list)
    match: ParamMatch | None = None
    others: list[tuple[Path, SourceKind]] = field(default_factory=list)  # e.g. torch programs
    alignment: NameAlignment | None = None  # set when the parameters' names were renamed onto the graph's
    ortmodule: OrtModuleFiles | None = None  # set when the model was picked among ORTModule-saved graphs


MODEL_PREFERENCE = ("eval", "inference", "forward", "model")
NOT_THE_MODEL = ("training_model", "optimizer_model")


@dataclass
class Classified:
    """Dropped files sorted out: the model, parameter files, the rest, and the ORTModule set the
    model was picked from (its other graphs are alternatives, not "unused" files)."""

    model: Path | None
    params: list[Path]
    others: list[tuple[Path, SourceKind]]
    ortmodule: OrtModuleFiles | None = None


def classify(paths: Iterable[str | Path]) -> tuple[Path | None, list[Path], list[tuple[Path, SourceKind]]]:
    """Split dropped files/folders into (model, parameter files, others). Folders are expanded."""
    found = classify_sources(paths)
    return found.model, found.params, found.others


def classify_sources(paths: Iterable[str | Path]) -> Classified:
    """`classify`, also saying which ORTModule set (if any) the model came from."""
    onnx_files, param_files, others = _sort_files(paths)
    model, ortmodule = _pick_model(onnx_files, others)
    return Classified(model, param_files, others, ortmodule)


def _sort_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[Path], list[tuple[Path, SourceKind]]]:
    onnx_files: list[Path] = []
    param_files: list[Path] = []
    others: list[tuple[Path, SourceKind]] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise OnnxportError(f"{path}: no such file or folder")
        kind = sniff(path)
        if path.is_dir() and kind == SourceKind.UNKNOWN:
            children = [c for c in sorted(path.iterdir())  # files, and folders of a known kind; no pipes
                        if c.is_file() or (c.is_dir() and sniff(c) != SourceKind.UNKNOWN)]
            sub_onnx, sub_params, sub_others = _sort_files(children)
            onnx_files += sub_onnx
            param_files += sub_params
            others += sub_others
            continue
        if kind == SourceKind.ONNX:
            onnx_files.append(path)
        elif kind in PARAMETER_KINDS:
            param_files.append(path)
        elif kind == SourceKind.CHECKPOINT_DATA:
            continue
        else:
            others.append((path, kind))
    return onnx_files, param_files, others


def _pick_model(onnx_files: list[Path], others: list[tuple[Path, SourceKind]]
                ) -> tuple[Path | None, OrtModuleFiles | None]:
    """The model among several .onnx files; the rest go to `others`.

    A lone file is the model, whatever its name. Graphs ORTModule saved (`P_<stage>_<mode>.onnx`)
    count as one candidate per prefix, its `inference_graph()`: by name alone the execution model
    would win, which holds ORT-internal rewrites. Graphs of several prefixes are ambiguous: the
    user is asked to open one model's files.
    """
    if not onnx_files:
        return None, None
    if len(onnx_files) == 1:
        return onnx_files[0], None
    sets = group_files(onnx_files)
    if len(sets) > 1:
        raise several_models_error(sets[0].folder, sets, hint="open the files of one prefix, not the folder")
    in_set = {p for s in sets for p in s.files.values()}
    candidates = [s.inference_graph() for s in sets] + [p for p in onnx_files if p not in in_set]
    chosen = _by_name(candidates)
    ortmodule = sets[0] if sets and chosen in in_set else None
    for p in onnx_files:
        if p != chosen and not (ortmodule and p in in_set):
            others.append((p, SourceKind.ONNX))
    return chosen, ortmodule


def _by_name(onnx_files: list[Path]) -> Path:
    candidates = [p for p in onnx_files if not any(w in p.name for w in NOT_THE_MODEL)] or onnx_files
    for word in MODEL_PREFERENCE:
        for p in candidates:
            if word in p.name:
                return p
    return candidates[0]


def open_sources(
    paths: Iterable[str | Path],
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> LoadedSources:
    """Open files/folders as one job: load the model graph, index it, read and match parameters."""
    report = Reporter(progress, cancel)
    found = classify_sources(paths)
    model_path, param_paths = found.model, found.params
    loaded = LoadedSources(model_path=model_path, param_paths=param_paths, others=found.others,
                           ortmodule=found.ortmodule)
    report.check()
    report(0.05, "reading parameters")
    if param_paths:
        sets = [read_parameters(p) for p in param_paths]
        loaded.params = merge_parameter_sets(sets)
    report.check()
    if model_path is not None:
        report.check()
        report(0.3, f"loading {model_path.name}")
        loaded.model = load_graph(model_path)
        if loaded.params is not None:
            loaded.params, loaded.alignment = align_if_better(loaded.model, loaded.params)
        report.check()
        report(0.6, "indexing tensors")
        names = loaded.params.params.keys() if loaded.params else ()
        loaded.index = build_index(loaded.model, model_path, parameter_names=names)
        if loaded.params is not None:
            loaded.match = (loaded.alignment.match if loaded.alignment is not None
                            else match_parameters(loaded.model, loaded.params))
    report(1.0, "loaded")
    return loaded
