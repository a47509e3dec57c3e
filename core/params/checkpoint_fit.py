"""What a checkpoint must fit before an export embeds it: one policy for the CLI, the API and the app.

`fit_checkpoint(model, params, match)` says how a parameter set fits a graph; `require_fit`
refuses, in one line naming the counts:
- nothing matched (a checkpoint of another model): always;
- a nominal checkpoint, a shape/dtype mismatch, a missing parameter (`ParamMatch.raise_if_unusable`);
- a partial fit (entries the model does not take while weights of its own stay as they are):
  unless the user allows a partial embed; then `stayed` and `unused` are what the export lists.
`require_filled(names, ...)` refuses parameter-like inputs an export would keep without values (an
eval graph without its checkpoint) unless the user keeps them as inputs on purpose: no verdict is
given over a model whose weights are still inputs. Each refusal names the choice that lifts it
(`allow`), so a front end can offer it in its own words.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from onnxport.core.io.parameter_set import ParameterSet
from onnxport.core.params.match import PARAM_NAME, ParamMatch
from onnxport.core.util.errors import CheckpointMismatchError, OnnxportError

FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
NEVER_USED = "num_batches_tracked"  # a BatchNorm counter no inference graph reads
LISTED = 3  # names shown in one line before "and N more"
ALLOW_PARTIAL = "allow_partial"
KEEP_PARAMETER_INPUTS = "keep_parameter_inputs"


def names_text(names: list[str] | tuple[str, ...]) -> str:
    """'a', 'a and b', 'a, b, c and 2 more'."""
    names = list(names)
    if len(names) > LISTED:
        return f"{', '.join(names[:LISTED])} and {len(names) - LISTED} more"
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


@dataclass(frozen=True)
class CheckpointFit:
    """How a parameter set fits a graph: counts, and what a partial embed leaves as it was."""

    matched: int
    entries: int  # the parameter set's tensors
    unexpected: int  # entries the graph has no slot for
    unused: tuple[str, ...]  # those of them that matter (BatchNorm counters aside)
    stayed: tuple[str, ...]  # the graph's own float weights the set does not replace

    @property
    def partial(self) -> bool:
        """Entries left unused while weights of the graph keep their own values: a mix."""
        return bool(self.unused and self.stayed)

    def counts(self) -> str:
        """'0 of 4 parameters matched, 4 unexpected'."""
        unexpected = f", {self.unexpected} unexpected" if self.unexpected else ""
        return f"{self.matched} of {self.entries} parameters matched{unexpected}"

    def to_dict(self) -> dict:
        """What stayed as it was (the report's and the metadata's `partial`)."""
        return {"matched": self.matched, "stayed": list(self.stayed), "unused": list(self.unused)}


class CheckpointFitError(CheckpointMismatchError):
    """A refusal of the policy above; `allow` names the choice that lifts it (None: none does)."""

    def __init__(self, message: str, fit: CheckpointFit, allow: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.fit, self.allow = fit, allow


class UnfilledParameterInputs(OnnxportError):
    """Parameter-like inputs the export would keep without values; `names` lists them."""

    allow = KEEP_PARAMETER_INPUTS

    def __init__(self, message: str, names: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.names = names


def fit_checkpoint(model: onnx.ModelProto, params: ParameterSet, match: ParamMatch,
                   unused: list[str] | None = None) -> CheckpointFit:
    """The fit of `params` (named as `match` matched them) on `model`; `unused`: the unexpected
    entries named as in the file, when the names were fitted to the graph (`name_alignment`)."""
    named = unused if unused is not None else match.unexpected
    stayed = tuple(t.name for t in model.graph.initializer if t.data_type in FLOAT_TYPES and t.name not in params)
    return CheckpointFit(matched=len(match.matched), entries=len(params), unexpected=len(match.unexpected),
                         unused=tuple(n for n in named if not n.endswith(NEVER_USED)), stayed=stayed)


def require_fit(fit: CheckpointFit, match: ParamMatch, allow_partial: bool = False, source: str = "the checkpoint"
                ) -> None:
    """Raise the refusal of the module docstring, or return: the set may be embedded."""
    if fit.entries and not fit.matched and not match.nominal and not match.mismatched:  # else: name the type
        raise CheckpointFitError(f"{source} fits nothing in the model: {fit.counts()}", fit,
                                 hint="is it the checkpoint of this model? 'onnxport inspect MODEL --checkpoint "
                                      "CKPT' lists the names")
    match.raise_if_unusable()
    if fit.partial and not allow_partial:
        raise CheckpointFitError(
            f"{source} fits the model only partly: {fit.counts()}; {len(fit.stayed)} model weights would keep "
            f"their own values ({names_text(fit.stayed)}), {len(fit.unused)} entries are not used "
            f"({names_text(fit.unused)})", fit, ALLOW_PARTIAL, hint="a partial embed (--allow-partial) embeds only what matches")


def require_filled(names: list[str], keep_parameter_inputs: bool = False, model: str = "the model",
                   checkpoint_beside: str | None = None) -> None:
    """Refuse parameter-like graph inputs the export keeps without values (see the module docstring)."""
    if not names or keep_parameter_inputs:
        return
    what = "a parameter input" if len(names) == 1 else f"{len(names)} parameter inputs"
    where = f" ({checkpoint_beside})" if checkpoint_beside else ""
    raise UnfilledParameterInputs(
        f"{model}: {what} ({names_text(names)}) would stay inputs without values; give the checkpoint{where}, "
        f"or keep them as inputs on purpose", names)


def unfilled_inputs(kept_inputs: list[str], params: ParameterSet | None, initializer_names: set[str]) -> list[str]:
    """The parameter-like graph inputs (`fc1.weight`...) among `kept_inputs` that neither an
    initializer nor `params` gives a value."""
    return [n for n in kept_inputs if PARAM_NAME.search(n) and n not in initializer_names
            and (params is None or n not in params)]
