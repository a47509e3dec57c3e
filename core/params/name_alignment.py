"""Fit a parameter file's names to a graph's when they differ only by a wrapper prefix.

PyTorch names a parameter after the attribute path that reaches it, so the same weight is
`fc1.weight` in a plain state_dict, `module.fc1.weight` under DistributedDataParallel,
`_orig_mod.fc1.weight` after `torch.compile`, and `_original_module.fc1.weight` in the graphs
ORTModule exports (its wrapper holds the user's module under that attribute). Nothing else
differs, so exporting a state_dict into such a graph only needs one prefix swapped.

Contract: `align_parameter_names(model, params)` returns `params` renamed by the one prefix swap
(`old.` -> `new.`; either side may be empty) that makes the most of its names graph parameters,
or unchanged when no swap beats the names as they are, plus a `NameAlignment` saying what was
done and what then matched. It never loads tensor values and never raises for names that do not
fit: what is missing or unused is in the alignment's `match`/`unused`, for the caller to report.
Pure: onnx + the match module, no files, no Qt.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

import onnx

from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.params.match import ParamMatch, match_parameters

# Wrappers whose prefix is always tried, even when no name votes for it.
WRAPPER_PREFIXES = ("_original_module.", "module.", "_orig_mod.")
# ORT's own checkpoints are written from the graph's names: never renamed.
NEVER_ALIGNED_KINDS = ("ort-checkpoint", "ort-checkpoint-legacy")
MAX_CANDIDATES = 8  # the most-voted swaps worth counting hits for


@dataclass
class NameAlignment:
    """How a parameter set's names were mapped onto a graph's, and what then matched."""

    added_prefix: str = ""  # put in front of the names ("_original_module.")
    removed_prefix: str = ""  # taken off the names that had it ("module.")
    renamed: int = 0
    match: ParamMatch | None = None
    unused: list[str] = field(default_factory=list)  # parameter-file names the graph does not use, as in the file

    @property
    def changed(self) -> bool:
        return bool(self.added_prefix or self.removed_prefix)

    def how(self) -> str:
        """The rename in words ('' when the names were used as they are)."""
        if self.added_prefix and self.removed_prefix:
            return f"'{self.removed_prefix}' replaced by '{self.added_prefix}' in {self.renamed} names"
        if self.added_prefix:
            return f"names prefixed with '{self.added_prefix}'"
        if self.removed_prefix:
            return f"'{self.removed_prefix}' removed from {self.renamed} names"
        return ""

    def summary(self) -> str:
        parts = [p for p in (self.how(), self.match.summary() if self.match else "") if p]
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"added_prefix": self.added_prefix, "removed_prefix": self.removed_prefix,
                "renamed": self.renamed, "summary": self.summary(), "unused": self.unused,
                "missing": list(self.match.missing) if self.match else []}


def graph_parameter_slots(model: onnx.ModelProto) -> set[str]:
    """Names a parameter can fill: graph inputs and initializers."""
    return {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}


def _dot_suffixes(name: str) -> list[tuple[str, str]]:
    """(prefix, rest) splits of `name` at each '.', whole name first: 'a.b.c' -> ('', 'a.b.c'), ('a.', 'b.c')..."""
    splits = [("", name)]
    splits += [(name[: i + 1], name[i + 1:]) for i, ch in enumerate(name) if ch == "." and i + 1 < len(name)]
    return splits


def _votes(slots: set[str], names: list[str]) -> Counter:
    """Prefix swaps (old, new) suggested by each name's longest dotted tail that is also a slot's tail."""
    by_tail: dict[str, set[str]] = {}
    for slot in slots:
        for head, tail in _dot_suffixes(slot):
            by_tail.setdefault(tail, set()).add(head)
    votes: Counter = Counter()
    for name in names:
        for head, tail in _dot_suffixes(name):
            heads = by_tail.get(tail)
            if heads:
                if len(heads) == 1:  # an ambiguous tail ('weight') says nothing
                    votes[(head, next(iter(heads)))] += 1
                break
    return votes


def _rename(name: str, old: str, new: str) -> str:
    return new + name[len(old):] if name.startswith(old) else name


def _renamed_names(names: list[str], old: str, new: str) -> list[str] | None:
    """Every name after the swap, or None if two names would collide."""
    out = [_rename(n, old, new) for n in names]
    return out if len(set(out)) == len(out) else None


def _candidates(slots: set[str], names: list[str]) -> list[tuple[str, str]]:
    voted = [swap for swap, _ in _votes(slots, names).most_common(MAX_CANDIDATES)]
    tried = [(p, "") for p in WRAPPER_PREFIXES] + [("", p) for p in WRAPPER_PREFIXES]
    return [s for s in voted + tried if s != ("", "")]


def align_parameter_names(model: onnx.ModelProto, params: ParameterSet) -> tuple[ParameterSet, NameAlignment]:
    """`params` renamed to fit `model` (one prefix swapped) if that makes more names graph parameters."""
    slots = graph_parameter_slots(model)
    names = list(params)
    best_hits, best = sum(n in slots for n in names), ("", "")
    for old, new in dict.fromkeys(_candidates(slots, names)):
        renamed = _renamed_names(names, old, new)
        if renamed is None:
            continue
        hits = sum(n in slots for n in renamed)
        if hits > best_hits:
            best_hits, best = hits, (old, new)
    old, new = best
    alignment = NameAlignment(added_prefix=new, removed_prefix=old)
    original = {n: n for n in names}
    if best != ("", ""):
        renamed_params = {}
        for name, tensor in params.items():
            target = _rename(name, old, new)
            renamed_params[target] = dataclasses.replace(tensor, name=target)
            original[target] = name
        params = dataclasses.replace(params, params=renamed_params)
        alignment.renamed = sum(1 for n in names if _rename(n, old, new) != n)
    alignment.match = match_parameters(model, params)
    alignment.unused = [original.get(n, n) for n in alignment.match.unexpected]
    return params, alignment


def align_if_better(model: onnx.ModelProto, params: ParameterSet) -> tuple[ParameterSet, NameAlignment | None]:
    """What the open and export paths do: rename a torch-style parameter set onto `model` when a
    prefix swap matches more names; ORT checkpoints (named from the graph) and sets that already
    fit are returned as they are, with None."""
    if params.kind in NEVER_ALIGNED_KINDS:
        return params, None
    aligned, alignment = align_parameter_names(model, params)
    return (aligned, alignment) if alignment.changed else (params, None)
