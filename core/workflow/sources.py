"""What did the user give us? Open a set of files as one job's sources.

The user never picks a file type by hand (`io.kinds.sniff` looks at content first, the name
second). `open_sources` takes any mix of files and folders (a training-artifacts folder, an
eval model plus checkpoints, the graphs ORTModule saved plus a state_dict...) and returns the
model, its index, the merged parameters and how they match. Parameters named the PyTorch way
(a state_dict of the bare module, DDP's `module.`...) are renamed onto the graph's names when one
prefix swap makes more of them fit (`name_alignment`); what was done is kept in `alignment`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core.export.selection_graph import SelectionGraphs
from onnxport.core.graph.index import TensorIndex, build_index
from onnxport.core.graph.shape_infer import OUT_OF_PROCESS_NODES
from onnxport.core.graph.shape_types import TypeInference
from onnxport.core.io.kinds import PARAMETER_KINDS, SourceKind, sniff
from onnxport.core.io.model_io import FileIdentity, check_loaded, read_graph
from onnxport.core.io.ortmodule_files import OrtModuleFiles, group_files, several_models_error
from onnxport.core.io.parameter_set import ParameterSet, merge_parameter_sets
from onnxport.core.io.readers import read_parameters
from onnxport.core.params.checkpoint_fit import CheckpointFit, fit_checkpoint, unfilled_inputs
from onnxport.core.params.match import ParamMatch, match_parameters
from onnxport.core.params.name_alignment import NameAlignment, align_if_better
from onnxport.core.util.errors import CorruptFileError, OnnxportError, no_such_file
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter


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
    _graphs: SelectionGraphs | None = field(default=None, init=False, repr=False, compare=False)

    def fit(self) -> CheckpointFit | None:
        """How the parameters fit the model (`params.checkpoint_fit`), None without both."""
        if self.model is None or self.params is None or self.match is None:
            return None
        unused = self.alignment.unused if self.alignment is not None else None
        return fit_checkpoint(self.model, self.params, self.match, unused)

    def unfilled(self) -> list[str]:
        """The model's parameter-like inputs that nothing gives a value (no checkpoint, say)."""
        if self.model is None:
            return []
        graph = self.model.graph
        return unfilled_inputs([vi.name for vi in graph.input], self.params, {t.name for t in graph.initializer})

    def selection_graphs(self) -> SelectionGraphs:
        """The inference graph of each selection of this model, built once and read by the plan, the
        preview and the export (`export.selection_graph`)."""
        with _GRAPHS_LOCK:
            graphs = self._graphs
            if graphs is None or graphs.model is not self.model or graphs.params is not self.params \
                    or graphs.index is not self.index:  # none yet, or the sources changed since
                if self.model is None:
                    raise OnnxportError("no model is open")
                self._graphs = SelectionGraphs(self.model, self.model_path, self.params, self.index)
            return self._graphs


_GRAPHS_LOCK = threading.Lock()


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


def classify_sources(paths: Iterable[str | Path]) -> Classified:
    """Split dropped files/folders into the model, parameter files and others (folders expanded),
    and say which ORTModule set (if any) the model came from."""
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
            raise no_such_file(path)
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


def _index(loaded: LoadedSources, model_path: Path, types: TypeInference | None, report: Reporter,
           wait_types: bool) -> None:
    if loaded.params is not None:
        loaded.params, loaded.alignment = align_if_better(loaded.model, loaded.params)
    report.check()
    report(0.6, "indexing tensors")
    names = loaded.params.params.keys() if loaded.params else ()
    loaded.index = build_index(loaded.model, model_path, parameter_names=names, types=types,
                               cancel=report.token, wait_types=wait_types)


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


def open_sources(
    paths: Iterable[str | Path],
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    wait_types: bool = True,
) -> LoadedSources:
    """Open files/folders as one job: load the model graph, index it, read and match parameters.
    `wait_types=False`: a big graph's index may come back before shape inference ends (see
    `graph.index.build_index`; `graph.index_types.fill_types` completes it)."""
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
        types = _early_types(model_path)
        try:
            loaded.model, identity = read_graph(model_path)
            by_child = types is not None and len(loaded.model.graph.node) >= OUT_OF_PROCESS_NODES
            if not by_child:
                check_loaded(loaded.model, model_path, identity.size)
            try:
                _index(loaded, model_path, types, report, wait_types)
            except Exception:
                if by_child:  # a file that fails the checks may break the index: say what the checks say
                    _confirm_checks(types, loaded.model, model_path, identity, report.token)
                raise
            if by_child:
                _confirm_checks(types, loaded.model, model_path, identity, report.token)
        finally:
            if types is not None and (loaded.index is None or loaded.index.pending_types is None):
                types.close()
        if loaded.params is not None:
            loaded.match = (loaded.alignment.match if loaded.alignment is not None
                            else match_parameters(loaded.model, loaded.params))
    report(1.0, "loaded")
    return loaded
