"""The fp16 mode around the converter (fp16_convert.py): what float16 cannot hold, attempt, search.

Why measure: float16 tops out at 65504; a tensor past it in float32 (a sum of squares, a mask of
-3.4e38) becomes inf and all after it NaN: its producer and readers stay float32 (two Casts).
Contract:
- `beyond_float16(model, feeds, limit=...)` runs `model` (float32, weights loaded) on up to
  `max_feeds` feeds, every main-graph node output exposed, and returns `{node label: reason}` for
  the producers and readers of each tensor (graph inputs too) whose largest finite magnitude passes
  `limit` (float16's max / HEADROOM: inputs a bit larger still fit); `fp16_beyond(src, feeds)`.
- `fp16(src, dst, ...)` converts and writes `dst` (what stayed float32 and why: metadata
  `FP16_METADATA_KEY`), again with each op type the CPU provider refuses kept float32.
- `fp16_loop(...)`: `search.layer_error_loop`'s arguments plus `verdict` (held out): nothing is
  tuned in a conversion, so the first is judged there at once; only a miss starts the search.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.compare import Thresholds
from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.runtime import adapt_feed, load_full, session
from onnxport.core.evaluate.validate import ValidationReport
from onnxport.core.export.staging import Staging
from onnxport.core.graph.uses import has_bodies, subgraph_captures
from onnxport.core.quantize.attempt_check import attempt_record
from onnxport.core.quantize.domains import drop_unused_domains
from onnxport.core.quantize.fp16_convert import to_float16
from onnxport.core.quantize.fp16_nodes import FP16_MAX, node_label
from onnxport.core.quantize.search import Attempt, LoopResult, attempt_file, layer_error_loop
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import Reporter

HEADROOM = 4.0
MAX_FEEDS = 4


def _exposed(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    have = {o.name for o in copy.graph.output}
    names = [o for n in copy.graph.node if n.op_type != "Constant" for o in n.output if o]
    for name in names:
        if name not in have:
            copy.graph.output.append(onnx.ValueInfoProto(name=name))  # ORT infers the type
    return copy, [o.name for o in copy.graph.output]


def tensor_peaks(model: onnx.ModelProto, feeds: Iterable[dict], max_feeds: int = MAX_FEEDS,
                 workdir=None) -> dict[str, float]:
    """Largest finite |value| of every float tensor (graph inputs and node outputs) over the feeds."""
    exposed, names = _exposed(model)
    sess = session(exposed, label=f"{model.graph.name or 'model'} (all tensors exposed)", workdir=workdir)
    del exposed
    peaks: dict[str, float] = {}
    for count, feed in enumerate(feeds):
        if count >= max_feeds:
            break
        feed = adapt_feed(feed, sess)
        for name, value in list(feed.items()) + list(zip(names, sess.run(names, feed))):
            value = np.asarray(value)
            if value.dtype.kind != "f" or not value.size:
                continue
            peak = float(np.abs(value).max())  # one pass; the masked copy only when something is inf/NaN
            if not np.isfinite(peak):
                finite = np.abs(value[np.isfinite(value)])
                if not finite.size:
                    continue
                peak = float(finite.max())
            peaks[name] = max(peaks.get(name, 0.0), peak)
    return peaks


def beyond_float16(model: onnx.ModelProto, feeds: Iterable[dict], *, limit: float = FP16_MAX / HEADROOM,
                   max_feeds: int = MAX_FEEDS, workdir=None) -> dict[str, str]:
    """See the module docstring."""
    peaks = tensor_peaks(model, feeds, max_feeds, workdir)
    over = {name: peak for name, peak in peaks.items() if peak > limit}
    if not over:
        return {}
    kept: dict[str, str] = {}
    for i, node in enumerate(model.graph.node):
        reads = list(node.input) + (sorted(subgraph_captures(node)) if has_bodies(node) else [])
        for name in list(node.output) + reads:
            if name in over:
                kept.setdefault(node_label(node, i), f"'{name}' reaches {over[name]:.3g} in float32 "
                                                     f"(float16 max 65504)")
    return kept


# --- the attempt ---------------------------------------------------------------------------------

_NOT_IMPLEMENTED = re.compile(r"Could not find an implementation for (\w+)\(")
FP16_METADATA_KEY = "onnxport.fp16"
MAX_NOTED = 6


@dataclass
class Fp16Outcome:
    blocked: list[str] = field(default_factory=list)  # op types the CPU provider refused in float16
    kept: dict[str, str] = field(default_factory=dict)  # node -> why it stayed float32 (requests excluded)

    def notes(self) -> list[str]:
        """One line each, all starting "kept float32" (the caller replaces them attempt after attempt)."""
        lines = [f"kept float32 for the CPU provider: op types {', '.join(self.blocked)}"] if self.blocked else []
        shown = list(self.kept.items())[:MAX_NOTED]
        if shown:
            more = f" (and {len(self.kept) - len(shown)} more)" if len(self.kept) > len(shown) else ""
            lines.append("kept float32, beyond float16's range: "
                         + "; ".join(f"{node}: {why}" for node, why in shown) + more)
        return lines


def fp16_beyond(src: Path, feeds, workdir: Path | None = None) -> dict[str, str]:
    """Nodes whose tensors pass float16's range on `feeds` (`beyond_float16`): measure once."""
    return beyond_float16(load_full(src), feeds, workdir=workdir)


def fp16(src: Path, dst: Path, *, keep_io_types: bool, block_ops, exclude: list[str], big: bool,
         beyond: dict[str, str] | None = None) -> Fp16Outcome:
    """Convert; returns what had to stay float32 (op types the CPU provider refused, nodes beyond range)."""
    source = load_full(src)
    requested = {name: "kept float32 on request" for name in exclude}
    outcome = Fp16Outcome()
    for _ in range(8):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        kept = to_float16(model, keep={**(beyond or {}), **requested}, keep_io_types=keep_io_types,
                          block_ops=set(block_ops) | set(outcome.blocked)).kept
        outcome.kept = {k: v for k, v in kept.items() if k not in requested and not v.startswith("op type")}
        drop_unused_domains(model)
        meta = [p for p in model.metadata_props if p.key != FP16_METADATA_KEY]
        del model.metadata_props[:]
        model.metadata_props.extend(meta)
        model.metadata_props.add(key=FP16_METADATA_KEY, value=json.dumps({"kept_float32": kept}))
        if big:
            onnx.save_model(model, str(dst), save_as_external_data=True, location=dst.name + ".data")
        else:
            onnx.save_model(model, str(dst))
        try:
            session(dst, checked=True)  # written here from a model checked when it was read
            return outcome
        except OnnxportError as exc:
            found = _NOT_IMPLEMENTED.search(str(exc))
            if not found or found.group(1) in outcome.blocked:
                raise
            outcome.blocked.append(found.group(1))
    raise OnnxportError(f"{src}: no float16 version ONNX Runtime's CPU provider runs "
                        f"(blocked {', '.join(outcome.blocked)})")


# --- the search ----------------------------------------------------------------------------------

def fp16_loop(attempt: Attempt, stage: Staging, name: str, prepared: Path, feeds: FeedSource, excluded: list[str],
              thresholds: Thresholds | None, op_types: set[str] | None, report: Reporter,
              verdict: Callable[[Path], ValidationReport] | None = None) -> LoopResult:
    """See the module docstring."""
    if verdict is None or thresholds is None:
        return layer_error_loop(attempt, stage, name, prepared, feeds, excluded, thresholds, op_types, report)
    report.check()
    report(0.0, "converting")
    dst = attempt_file(attempt, stage, name, 0, excluded, check=False)  # the fp16 attempt loads it; so does the verdict
    final = verdict(dst)
    record = attempt_record(dst, [], final.outputs, final.passed, final.failures(), inputs="held out")
    if final.passed:
        return LoopResult(dst, [], [record], True, final=final)
    shutil.rmtree(dst.parent, ignore_errors=True)
    outcome = layer_error_loop(attempt, stage, name, prepared, feeds, excluded, thresholds, op_types, report)
    outcome.attempts.insert(0, record)
    return outcome
