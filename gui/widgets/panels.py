"""The main window's read-only panels: what is loaded, the selected tensor, what the export
keeps, what the last export wrote.

Each panel is a QGroupBox around one rich-text label, filled from core objects (ModelSession,
TensorInfo, ExportPlan) by a pure function returning HTML, so the text is testable without Qt
painting anything.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QVBoxLayout

from onnxport.core.export.export import ExportPlan, ExportResult
from onnxport.core.graph.index import TensorInfo
from onnxport.core.util.text import human_size
from onnxport.core.workflow.session import ModelSession

from .tensor_text import readable_shape
from .wrapped_label import WrappedLabel

if TYPE_CHECKING:  # the quantize/validate stack loads with the first export that uses it, not at startup
    from onnxport.core.workflow.post_export import PostExportResult

WARN = "#b25d00"
BAD = "#c0392b"
OK = "#2e7d32"
MAX_LISTED = 6


def _esc(text: object) -> str:
    return html.escape(str(text))


def _names(names: list[str]) -> str:
    shown = ", ".join(_esc(n) for n in names[:MAX_LISTED])
    more = len(names) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def _file_size(path: Path) -> int | None:
    try:
        if path.is_dir():
            return sum(f.stat().st_size for f in path.iterdir() if f.is_file())
        size = path.stat().st_size
        data = path.with_name(path.name + ".data")
        return size + (data.stat().st_size if data.exists() else 0)
    except OSError:
        return None


def sources_html(loaded: ModelSession | None) -> str:
    if loaded is None:
        return "<i>Nothing loaded yet.</i>"
    rows = []
    if loaded.model_path is not None:
        index = loaded.index
        detail = f"{index.node_count} nodes, {len(index)} tensors" if index else ""
        rows.append(f"<b>Model</b> {_esc(loaded.model_path.name)} "
                    f"({human_size(_file_size(loaded.model_path))}; {detail})")
    else:
        rows.append(f"<span style='color:{BAD}'><b>No model</b>: add the eval model (.onnx)</span>")
    if loaded.ortmodule is not None:
        used = next((f"{s}_{m}" for (s, m), p in loaded.ortmodule.files.items() if p == loaded.model_path), "?")
        rows.append(f"ORTModule graphs '{_esc(loaded.ortmodule.prefix)}': {len(loaded.ortmodule.files)} saved, "
                    f"using {_esc(used)}")
    params = loaded.params
    for path in loaded.param_paths:
        rows.append(f"<b>Parameters</b> {_esc(path.name)} ({human_size(_file_size(path))})")
    if params is not None:
        rows.append(f"{len(params)} tensors ({params.kind}), {len(params.trainable)} trainable, "
                    f"{len(params.frozen)} frozen")
        if params.nominal:
            rows.append(f"<span style='color:{BAD}'><b>Nominal checkpoint</b>: it holds shapes only, "
                        "no trained values - export needs the real checkpoint</span>")
    if loaded.alignment is not None:
        rows.append(f"Parameter names fitted to the model: {_esc(loaded.alignment.how())}")
    match = loaded.match
    if match is not None:
        if match.ok:
            rows.append(f"<span style='color:{OK}'>&#10003; {len(match.matched)} parameters match the model</span>")
        if match.missing:
            rows.append(f"<span style='color:{BAD}'><b>Missing</b> from the checkpoint: "
                        f"{_names(match.missing)}</span>")
        if match.mismatched:  # one line each: the heading, then a tensor per line
            rows.append(f"<span style='color:{BAD}'><b>Shape/type mismatch</b> (export is off):</span>")
            rows += [f"<span style='color:{BAD}'>&nbsp;&nbsp;{_esc(m.name)}: model {_esc(m.expected)}, "
                     f"checkpoint {_esc(m.got)}</span>" for m in match.mismatched[:MAX_LISTED]]
            if len(match.mismatched) > MAX_LISTED:
                rows.append(f"<span style='color:{BAD}'>&nbsp;&nbsp;and {len(match.mismatched) - MAX_LISTED} more</span>")
        unused = loaded.alignment.unused if loaded.alignment is not None else match.unexpected  # as in the file
        if unused:
            rows.append(f"<span style='color:{WARN}'>Not used by the model: {_names(unused)}</span>")
    if loaded.model_path is not None and params is None:
        rows.append(_no_checkpoint_row(loaded.unfilled()))
    if loaded.others:
        rows.append(f"<span style='color:{WARN}'>{not_used_line(loaded.others)}</span>")
    return "<br>".join(rows)


def not_used_line(others) -> str:
    """The files opened that are not sources, as one line of HTML: their count and the first
    MAX_LISTED names (a dropped folder of 100,000 files listed them all, and laying that out froze
    the window for tens of seconds)."""
    named = [f"{_esc(path.name)} ({kind.value})" for path, kind in others[:MAX_LISTED]]
    if len(others) <= MAX_LISTED:
        return "Not used here: " + ", ".join(named)
    return f"Not used here: {len(others):,} files: {', '.join(named)} and {len(others) - MAX_LISTED:,} more"


def _no_checkpoint_row(unfilled: list[str]) -> str:
    """What opening a model without a checkpoint means: its own weights, or none at all."""
    if not unfilled:
        return "<i>No checkpoint: the model's own weights are kept.</i>"
    return (f"<span style='color:{BAD}'><b>No checkpoint</b>: {_names(unfilled)} "
            f"{'is an input' if len(unfilled) == 1 else 'are inputs'} without values - add the checkpoint "
            "to export the trained model</span>")


def tensor_html(info: TensorInfo | None) -> str:
    if info is None:
        return "<i>Select a tensor in the tree.</i>"
    rows = [f"<b>{_esc(info.name)}</b>",
            f"{_esc(info.dtype or '?')} {_esc(readable_shape(info.shape))} &middot; {info.kind.value}"]
    if info.producer_op:
        rows.append(f"produced by {_esc(info.producer_op)} <tt>{_esc(info.producer)}</tt>")
    if info.consumers:
        rows.append(f"consumed by {_names(info.consumers)}")
    else:
        rows.append("consumed by nothing")
    if info.scope:
        rows.append(f"scope <tt>{_esc(info.scope)}</tt>")
    if info.nbytes:
        rows.append(f"{human_size(info.nbytes)} of values")
    if info.training_only:
        rows.append(f"<span style='color:{WARN}'>training-only: part of the loss computation</span>")
    return "<br>".join(rows)


def plan_html(plan: ExportPlan | None, error: str | None = None) -> str:
    if error:
        return f"<span style='color:{BAD}'>{_esc(error)}</span>"
    if plan is None:
        return "<i>Check at least one output to export.</i>"
    rows = [f"<b>Keeps</b> {len(plan.outputs)} output(s): {_names(plan.outputs)}",
            (f"starts at (new inputs): {_names(plan.new_inputs)}"
             + (f"; the model's inputs still needed: {_names(plan.inputs)}" if plan.inputs else "")
             if plan.new_inputs else f"inputs: {_names(plan.inputs) or '-'}"),
            _nodes_line(plan),
            f"{len(plan.kept_parameters)} parameters kept, {len(plan.dropped_parameters)} dropped",
            (f"written size <b>{human_size(plan.estimated_bytes)}</b>" if plan.exact else
             f"estimated size <b>about {human_size(plan.estimated_bytes)}</b> (parameters; graph too big to "
             "fold in advance)")]
    if plan.dropped_inputs:
        rows.append(f"drops inputs: {_names(plan.dropped_inputs)}")
    return "<br>".join(rows)


def _nodes_line(plan: ExportPlan) -> str:
    """'4 nodes written (2 folded into constants, 1 Dropout/BatchNorm in inference form), 6 dropped'."""
    if not plan.exact:
        return f"about {plan.kept_nodes} nodes kept (before folding), {plan.dropped_nodes} dropped"
    notes = []
    if plan.folded_nodes:
        notes.append(f"{plan.folded_nodes} folded into constants")
    if plan.eval_mode_changes:
        notes.append(f"{plan.eval_mode_changes} Dropout/BatchNorm in inference form")
    detail = f" ({', '.join(notes)})" if notes else ""
    return f"{plan.kept_nodes} nodes written{detail}, {plan.dropped_nodes} dropped"


def export_html(result: ExportResult, post: PostExportResult | None = None) -> str:
    """The result of an export: where it went, how big, what it keeps, and the verdict."""
    rows = [f"<b>Wrote</b> <tt>{_esc(result.path)}</tt>",
            f"{human_size(result.size_bytes)}"
            + (f" + external data <tt>{_esc(Path(result.data_path).name)}</tt>" if result.data_path else "")
            + f" &middot; {result.nodes} nodes, {result.folded} folded &middot; {result.seconds:.2f} s",
            f"outputs: {_names(list(result.outputs))} &middot; inputs: {_names(list(result.inputs))}"]
    if post is not None and post.quantize is not None:
        rows.append(f"quantized: <tt>{_esc(post.quantize.path)}</tt>")
    passed = post.passed if post is not None else None
    if passed is not None:
        color, word = (OK, "passed") if passed else (BAD, "FAILED")
        rows.append(f"<span style='color:{color}'><b>validation {word}</b></span>")
    return "<br>".join(rows)


class TextPanel(QGroupBox):
    """A titled box with one selectable rich-text label."""

    def __init__(self, title: str, text: str = "") -> None:
        super().__init__(title)
        self.label = WrappedLabel(text)
        self.label.setTextFormat(Qt.RichText)
        self.label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.label.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        layout = QVBoxLayout(self)
        layout.addWidget(self.label)

    def set_html(self, text: str) -> None:
        self.label.setText(text)

    def text(self) -> str:
        return self.label.text()
