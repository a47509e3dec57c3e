"""Bias correction for static int8: the mean shift weight rounding causes, absorbed by each bias.

Why: rounding a convolution's weights to int8 moves the mean of each output channel by
(Wq - W) . E[x], and over a deep CNN these shifts add up; better activation ranges cannot help,
the error is in the weights. This is the empirical bias correction of Nagel et al., "Data-Free
Quantization..." (ICCV 2019), E[x] measured on the calibration data (docs/performance.md).

Contract:
- `input_means(model_path, feeds, workdir, report, op_types)` runs the float model over the
  calibration feeds one batch at a time and returns `InputMeans`: per Conv/ConvTranspose (of the
  quantized `op_types`) with an initializer weight, its input's per-channel mean.
- `correct_biases(model, means, per_channel=, reduce_range=, exclude=)`, a checked pass (passes.py):
  in place, each measured bias b becomes b - (Wq - W) . E[x], Wq exactly as ORT's QDQ quantizer
  writes it; nodes in `exclude` are left alone; the nodes corrected are its REWRITTEN changes.
- `bias_corrected(...)`: that from a file to a file for one attempt, with its note. Main graph only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.runtime import adapt_feed, load_full, model_size, run, session
from onnxport.core.graph.passes import REWRITTEN, NodeChange, PassResult
from onnxport.core.quantize.passes import checked
from onnxport.core.util.progress import Reporter

CORRECTED_OPS = ("Conv", "ConvTranspose")
BIG_MODEL_BYTES = 1536 << 20


@dataclass
class InputMeans:
    """node name -> per-channel mean of its input (float64), and how many batches were measured."""

    by_node: dict[str, np.ndarray] = field(default_factory=dict)
    batches: int = 0
    shifts: dict[tuple, np.ndarray | None] = field(default_factory=dict)  # per weight format: same every attempt


def _weighted_nodes(graph: onnx.GraphProto, op_types: Iterable[str] = CORRECTED_OPS) -> list[onnx.NodeProto]:
    weights = {i.name for i in graph.initializer}
    ops = set(CORRECTED_OPS) & set(op_types)
    return [n for n in graph.node if n.op_type in ops and n.name and len(n.input) >= 2
            and n.input[1] in weights and n.input[0]]


def input_means(model_path: Path, feeds: FeedSource, workdir: Path, report: Reporter,
                op_types: Iterable[str] = CORRECTED_OPS) -> InputMeans:
    """See the module docstring."""
    model = load_full(model_path)
    nodes = _weighted_nodes(model.graph, op_types)
    means = InputMeans()
    if not nodes:
        return means
    declared = {o.name for o in model.graph.output}
    wanted = list(dict.fromkeys(n.input[0] for n in nodes))
    for name in wanted:
        if name not in declared:
            model.graph.output.add(name=name)
    sess = session(model, label=f"{model_path.name} (bias correction)", workdir=workdir)
    del model
    sums: dict[str, np.ndarray] = {}
    total = max(len(feeds), 1)
    for i, feed in enumerate(feeds):
        report.check()
        report(i / total, f"measuring input means for bias correction (batch {i + 1}/{total})")
        outputs = run(sess, wanted, adapt_feed(feed, sess), label=f"{model_path.name} (bias correction)")
        for name, value in zip(wanted, outputs, strict=True):
            if value.ndim < 2:
                continue
            channel = value.astype(np.float64).mean(axis=(0, *range(2, value.ndim)))
            sums[name] = sums.get(name, 0) + channel
        means.batches += 1
    if means.batches:
        for node in nodes:
            if node.input[0] in sums:
                means.by_node[node.name] = sums[node.input[0]] / means.batches
    return means


def rounded_weight(weight: np.ndarray, axis: int | None, reduce_range: bool) -> np.ndarray:
    """The weight as ORT's QDQ quantizer stores it (int8 symmetric), dequantized back to float: its
    `quantize_data` (quant_utils.py, 1.32) for each channel at once, the same float32/float64 steps."""
    from onnx import TensorProto
    from onnxruntime.quantization.quant_utils import get_qmin_qmax_for_qType

    if weight.size == 0:
        return weight.astype(np.float64)
    qmin, qmax = get_qmin_qmax_for_qType(TensorProto.INT8, reduce_range, symmetric=True)
    data = weight.astype(np.float32)
    rows = (np.moveaxis(data, axis, 0) if axis is not None else data[None]).reshape(
        data.shape[axis] if axis is not None else 1, -1)
    absmax = np.maximum(np.abs(np.minimum(rows.min(axis=1), 0)), np.abs(np.maximum(rows.max(axis=1), 0)))
    scale = (absmax.astype(np.float64) + absmax.astype(np.float64)) / (float(qmax) - float(qmin))
    stored = scale.astype(np.float32)
    stored[scale < np.finfo(np.float32).tiny] = 1.0  # ORT: scale 1, zero point 0 for an all-zero channel
    full = TensorProto.INT8  # quantize_nparray clips to the type's whole range
    low, high = get_qmin_qmax_for_qType(full)
    q = np.clip((rows / stored[:, None]).round(), low, high).astype(np.int8)
    back = q.astype(np.float64) * stored.astype(np.float64)[:, None]
    if axis is None:
        return back.reshape(weight.shape)
    moved = np.moveaxis(data, axis, 0).shape
    return np.moveaxis(back.reshape(moved), 0, axis)


def _shift(node: onnx.NodeProto, weight: np.ndarray, rounded: np.ndarray, mean: np.ndarray) -> np.ndarray | None:
    """(Wq - W) . E[x] per output channel; None when the shapes do not fit (then: no correction)."""
    group = next((a.i for a in node.attribute if a.name == "group"), 1)
    delta = (rounded - weight.astype(np.float64)).sum(axis=tuple(range(2, weight.ndim)))
    if node.op_type == "Conv":  # weight [O, I/g, k...]: out channel o reads its group's inputs
        out_ch, per_group = delta.shape
        if mean.size != per_group * group or out_ch % group:
            return None
        grouped = mean.reshape(group, 1, per_group)
        return (delta.reshape(group, out_ch // group, per_group) * grouped).sum(-1).reshape(out_ch)
    # ConvTranspose, weight [I, O/g, k...]: each output pixel sums k/stride of the kernel taps on average
    if group != 1 or mean.size != delta.shape[0]:
        return None
    strides = next((list(a.ints) for a in node.attribute if a.name == "strides"), [1] * (weight.ndim - 2))
    return (delta * mean[:, None]).sum(0) / float(np.prod(strides))


@checked
def correct_biases(model: onnx.ModelProto, means: InputMeans, *, per_channel: bool, reduce_range: bool,
                   exclude: Iterable[str] = ()) -> PassResult:
    """See the module docstring."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    uses = Counter(name for n in graph.node for name in n.input)
    skip = set(exclude)
    changes: list[NodeChange] = []
    for node in _weighted_nodes(graph):
        mean = means.by_node.get(node.name)
        if mean is None or node.name in skip:
            continue
        key = (node.name, node.input[1], per_channel, reduce_range)
        if key not in means.shifts:
            weight = numpy_helper.to_array(inits[node.input[1]])
            axis = (0 if node.op_type == "Conv" else 1) if per_channel else None
            means.shifts[key] = _shift(node, weight, rounded_weight(weight, axis, reduce_range), mean)
        shift = means.shifts[key]
        if shift is None or not np.all(np.isfinite(shift)):
            continue
        bias_name = node.input[2] if len(node.input) > 2 else ""
        if bias_name and (bias_name not in inits or uses[bias_name] != 1):
            continue  # a bias computed in the graph, or shared: leave it
        bias = numpy_helper.to_array(inits[bias_name]).astype(np.float64) if bias_name else 0.0
        new = (bias - shift).astype(np.float32)
        if bias_name and np.array_equal(new, bias):
            continue  # a shift that rounds to nothing: the bias stays as it is
        if bias_name:
            inits[bias_name].CopyFrom(numpy_helper.from_array(new, bias_name))
        else:
            bias_name = f"{node.name}_corrected_bias"
            graph.initializer.append(numpy_helper.from_array(new, bias_name))
            while len(node.input) < 3:
                node.input.append("")
            node.input[2] = bias_name
        changes.append(NodeChange(node.name, REWRITTEN, "bias corrected"))
    return PassResult(model, changed=bool(changes), changes=changes)


BIAS_NOTE = "bias corrected on "


def bias_corrected(src: Path, dst: Path, means: InputMeans | None, *, per_channel: bool, reduce_range: bool,
                   exclude: Iterable[str], notes: list[str]) -> Path:
    """`dst` with the biases corrected for this weight format and these float nodes, or `src` when
    nothing was measured or corrected; `notes` gets (or has replaced) one line saying on how many."""
    if means is None or not means.by_node:
        return src
    model = load_full(src)
    corrected = len(correct_biases(model, means, per_channel=per_channel, reduce_range=reduce_range,
                                   exclude=exclude).changes)
    if corrected and model_size(src) > BIG_MODEL_BYTES:
        onnx.save_model(model, str(dst), save_as_external_data=True, location=dst.name + ".data")
    elif corrected:
        onnx.save_model(model, str(dst))
    notes[:] = [n for n in notes if not n.startswith(BIAS_NOTE)]
    notes.append(f"{BIAS_NOTE}{corrected} convolution(s): the mean shift their int8 weights cause, "
                 f"measured on the calibration data ({means.batches} batch(es))")
    return dst if corrected else src
