"""Task presets for exporting Hugging Face models (seed 003): what goes in, what comes out.

Contract: `PRESETS[name]` is a `TaskPreset` naming the transformers Auto class to load, the output
names in order and their dynamic axes. Inputs are named as the tokenizer names them (`input_ids`,
`attention_mask`, `token_type_ids` where the model takes it), dynamic axes {0: "batch", 1:
"sequence"}. `wrap_for_task(model, preset, input_names)` (needs torch) returns the module the
exporter traces: inputs positional, exactly the preset's outputs.
- default: the encoder's `last_hidden_state` (batch, sequence, hidden).
- pooling: `embeddings` (batch, hidden), the attention-mask-weighted mean of the token states;
  `pooling="cls"` takes the first token; `normalize=True` (a sentence-transformers Normalize
  module, st_modules.py) L2-normalises them.
- question-answering: `start_logits`, `end_logits` (batch, sequence).
- text-classification and zero-shot-classification: `logits` (batch, labels).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnxport.core.util.errors import OnnxportError

TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
INPUT_AXES = {0: "batch", 1: "sequence"}
POOLING_MODES = ("mean", "cls")


@dataclass(frozen=True)
class TaskPreset:
    name: str
    description: str
    auto_class: str  # transformers Auto class that loads the model for this task
    outputs: tuple[str, ...]
    output_axes: dict[str, dict[int, str]] = field(default_factory=dict)

    def dynamic_axes(self, input_names: list[str]) -> dict[str, dict[int, str]]:
        """`dynamic_axes` for torch.onnx.export: batch/sequence on every input and output."""
        axes = {name: dict(INPUT_AXES) for name in input_names}
        axes.update({name: dict(a) for name, a in self.output_axes.items()})
        return axes


_SEQ = {0: "batch", 1: "sequence"}
PRESETS: dict[str, TaskPreset] = {
    "default": TaskPreset("default", "last hidden state of every token", "AutoModel",
                          ("last_hidden_state",), {"last_hidden_state": dict(_SEQ)}),
    "pooling": TaskPreset("pooling", "one embedding per input (mean of token states)", "AutoModel",
                          ("embeddings",), {"embeddings": {0: "batch"}}),
    "question-answering": TaskPreset("question-answering", "answer span start/end logits",
                                     "AutoModelForQuestionAnswering", ("start_logits", "end_logits"),
                                     {"start_logits": dict(_SEQ), "end_logits": dict(_SEQ)}),
    "text-classification": TaskPreset("text-classification", "class logits",
                                      "AutoModelForSequenceClassification", ("logits",), {"logits": {0: "batch"}}),
    "zero-shot-classification": TaskPreset("zero-shot-classification", "entailment logits (NLI head)",
                                           "AutoModelForSequenceClassification", ("logits",),
                                           {"logits": {0: "batch"}}),
}
TASKS = tuple(PRESETS)


def get_preset(task: str | None) -> TaskPreset:
    """The preset for `task` (None means "default"); a clear error naming the choices."""
    name = task or "default"
    if name not in PRESETS:
        raise OnnxportError(f"unknown task '{name}'; choose one of: {', '.join(TASKS)}")
    return PRESETS[name]


def default_task(architectures: list[str] | None) -> str:
    """The task a checkpoint was saved for, from config.json's `architectures` (else "default")."""
    for arch in architectures or []:
        if arch.endswith("ForQuestionAnswering"):
            return "question-answering"
        if arch.endswith("ForSequenceClassification"):
            return "text-classification"
    return "default"


def wrap_for_task(model, preset: TaskPreset, input_names: list[str], pooling: str = "mean",
                  normalize: bool = False):
    """A torch module: forward(*inputs) -> the preset's outputs (a tensor or a tuple), in order."""
    import torch

    if pooling not in POOLING_MODES:
        raise OnnxportError(f"unknown pooling '{pooling}'; choose one of: {', '.join(POOLING_MODES)}")

    class TaskModule(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            feeds = dict(zip(input_names, inputs))
            out = self.model(**feeds, return_dict=True)
            if preset.name == "default":
                return out.last_hidden_state
            if preset.name == "pooling":
                pooled = pool(out.last_hidden_state, feeds.get("attention_mask"), pooling)
                return torch.nn.functional.normalize(pooled, p=2.0, dim=1) if normalize else pooled
            if preset.name == "question-answering":
                return out.start_logits, out.end_logits
            return out.logits

    return TaskModule()


def pool(hidden, attention_mask, mode: str = "mean"):
    """Sentence embeddings from token states: masked mean (default) or the first token."""
    import torch

    if mode == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        return hidden.mean(dim=1)
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / torch.clamp(mask.sum(dim=1), min=1e-9)
