"""What did the user give us? Open files as one model's session (`session.ModelSession`).

One builder, two entries. `open_session(model_path, checkpoints)` (the CLI, the API): the model
and its parameter files, each in its role, read once (`read_checkpoints`, the one place that
reads them), the graph indexed only when asked. `open_sources(paths)` (the app): any mix of
files and folders (a training-artifacts folder, an eval model plus checkpoints, the graphs
ORTModule saved plus a state_dict...), sorted by content first, the name second
(`io.kinds.sniff`), then opened the same way, indexed. Parameters named the PyTorch way (a
state_dict of the bare module, DDP's `module.`...) are renamed onto the graph's names when one
prefix swap makes more of them fit (`name_alignment`); what was done is kept in `alignment`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx

from onnxport.core.graph.index import build_index
from onnxport.core.graph.shape_infer import OUT_OF_PROCESS_NODES
from onnxport.core.graph.shape_types import TypeInference
from onnxport.core.io import readers
from onnxport.core.io.kinds import PARAMETER_KINDS, SourceKind, sniff
from onnxport.core.io.model_io import FileIdentity, check_loaded, load_graph, read_graph
from onnxport.core.io.ortmodule_files import OrtModuleFiles, group_files, several_models_error
from onnxport.core.io.parameter_set import ParameterSet, merge_parameter_sets
from onnxport.core.params.match import match_parameters
from onnxport.core.params.name_alignment import align_if_better
from onnxport.core.util.errors import CorruptFileError, no_such_file
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter
from onnxport.core.workflow.session import ModelSession

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


LISTING_REPORT_EVERY = 1024  # folder entries between progress reports and cancel checks


def classify_sources(paths: Iterable[str | Path], report: Reporter | None = None) -> Classified:
    """Split dropped files/folders into the model, parameter files and others (folders expanded),
    and say which ORTModule set (if any) the model came from. A folder is listed with `os.scandir`
    (entry types from the listing), with progress and a cancel check every LISTING_REPORT_EVERY
    entries and files looked at: a drop of 100,000 files can be followed and cancelled."""
    report = report or Reporter()
    found: tuple[list[Path], list[Path], list[tuple[Path, SourceKind]]] = ([], [], [])
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise no_such_file(path)
        _sort_path(path, sniff(path), found, report)
    onnx_files, param_files, others = found
    model, ortmodule = _pick_model(onnx_files, others)
    return Classified(model, param_files, others, ortmodule)


def _sort_path(path: Path, kind: SourceKind, found: tuple[list, list, list], report: Reporter) -> None:
    onnx_files, param_files, others = found
    if kind == SourceKind.UNKNOWN and path.is_dir():
        children = _folder_sources(path, report)
        for count, child in enumerate(children, 1):
            if count % LISTING_REPORT_EVERY == 0:
                report.check()
                report(None, f"looking at {path.name}: {count:,} of {len(children):,} files")
            _sort_path(child, sniff(child), found, report)
    elif kind == SourceKind.ONNX:
        onnx_files.append(path)
    elif kind in PARAMETER_KINDS:
        param_files.append(path)
    elif kind != SourceKind.CHECKPOINT_DATA:
        others.append((path, kind))


def _folder_sources(folder: Path, report: Reporter) -> list[Path]:
    """The files of `folder` and its folders of a known kind, by name; no pipes or devices."""
    kept: list[Path] = []
    with os.scandir(folder) as entries:
        for count, entry in enumerate(entries, 1):
            if count % LISTING_REPORT_EVERY == 0:
                report.check()
                report(None, f"listing {folder.name}: {count:,} entries")
            try:
                if entry.is_file() or (entry.is_dir() and sniff(entry.path) != SourceKind.UNKNOWN):
                    kept.append(Path(entry.path))
            except OSError:  # gone meanwhile, or unreadable: not a source
                continue
    report.check()
    return sorted(kept)


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


VERDICT_WAIT_S = 10  # the child's checks come with the index; past this, the checks run here
EARLY_TYPES_BYTES = 1 << 20  # a model file this big may hold a big graph: infer its types while it loads


def _early_types(model_path: Path) -> TypeInference | None:
    """Shape inference of a big model file started before it is loaded (see graph.shape_types):
    it runs on the other core while this process parses and reads the graph. A big file may
    still be a small graph with big weights; then the index stops the child unused."""
    try:
        big = model_path.stat().st_size >= EARLY_TYPES_BYTES
    except OSError:
        return None
    return TypeInference.start(model_path) if big else None


def _confirm_checks(types: TypeInference, model: onnx.ModelProto, model_path: Path, identity: FileIdentity,
                    cancel: CancelToken) -> None:
    """`load_graph`'s checks of a big graph, made by the types child (started first, it parses the
    file on the other core while this process indexes it): its verdict stands for the bytes read
    here only if they are the same file content; otherwise the checks run here."""
    verdict = types.verdict(cancel, timeout=VERDICT_WAIT_S)
    if verdict is None or verdict.identity != tuple(identity):
        check_loaded(model, model_path, identity.size)
    elif verdict.error is not None:
        message, hint = verdict.error
        raise CorruptFileError(message, hint=hint)


def read_checkpoints(paths: Sequence[str | Path]) -> ParameterSet | None:
    """The parameter files at `paths` as one ParameterSet (several are merged: pipeline stages),
    None for none."""
    if not paths:
        return None
    return merge_parameter_sets([readers.read_parameters(p) for p in paths])


def open_sources(paths: Iterable[str | Path], progress: ProgressFn | None = None, cancel: CancelToken | None = None,
                 wait_types: bool = True) -> ModelSession:
    """Files/folders dropped on the app as one indexed session (see the module docstring).
    `wait_types=False`: a big graph's index may come back before shape inference ends (see
    `graph.index.build_index`; `graph.index_types.fill_types` completes it)."""
    found = classify_sources(paths, Reporter(progress, cancel))  # a big folder: progress and cancel
    return open_session(found.model, found.params, progress, cancel, indexed=True, wait_types=wait_types,
                        others=found.others, ortmodule=found.ortmodule)


def open_session(model_path: str | Path | None, checkpoints: Sequence[str | Path] = (),
                 progress: ProgressFn | None = None, cancel: CancelToken | None = None, *, indexed: bool = False,
                 wait_types: bool = True, model: onnx.ModelProto | None = None,
                 others: list[tuple[Path, SourceKind]] | None = None, ortmodule: OrtModuleFiles | None = None
                 ) -> ModelSession:
    """The session of the model at `model_path` with the parameters of `checkpoints` (merged):
    the graph loaded (or `model`, when the caller loaded it) and checked, indexed when `indexed`,
    the parameters fitted to its names and matched."""
    report = Reporter(progress, cancel)
    report(0.05, "reading parameters")
    params = read_checkpoints(list(checkpoints))
    report.check()
    index = alignment = match = None
    if model_path is not None:
        model_path = Path(model_path)
        report(0.3, f"loading {model_path.name}")
        if indexed:
            model, params, alignment, index = _load_indexed(model_path, params, report, wait_types)
        else:
            model = model if model is not None else load_graph(model_path)
            if params is not None:
                params, alignment = align_if_better(model, params)
        if params is not None:
            match = alignment.match if alignment is not None else match_parameters(model, params)
    report(1.0, "loaded")
    return ModelSession(model_path=model_path, model=model, index=index, params=params,
                        param_paths=tuple(Path(p) for p in checkpoints), match=match, alignment=alignment,
                        others=tuple(others or ()), ortmodule=ortmodule)


def _load_indexed(model_path: Path, params: ParameterSet | None, report: Reporter, wait_types: bool):
    """(model, params, alignment, index): the graph read, checked (by the types child for a big
    one, see `_confirm_checks`) and indexed, the parameters fitted to its names."""
    types = _early_types(model_path)
    index = None
    try:
        model, identity = read_graph(model_path)
        by_child = types is not None and len(model.graph.node) >= OUT_OF_PROCESS_NODES
        if not by_child:
            check_loaded(model, model_path, identity.size)
        try:
            alignment = None
            if params is not None:
                params, alignment = align_if_better(model, params)
            report.check()
            report(0.6, "indexing tensors")
            names = params.params.keys() if params else ()
            index = build_index(model, model_path, parameter_names=names, types=types, cancel=report.token,
                                wait_types=wait_types)
        except Exception:
            if by_child:  # a file that fails the checks may break the index: say what the checks say
                _confirm_checks(types, model, model_path, identity, report.token)
            raise
        if by_child:
            _confirm_checks(types, model, model_path, identity, report.token)
    finally:
        if types is not None and (index is None or index.pending_types is None):
            types.close()
    return model, params, alignment, index
