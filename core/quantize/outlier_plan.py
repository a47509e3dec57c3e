"""The float model the dynamic mode quantizes: outlier channels split off (outlier_split.py), then
activations rescaled into their weights (smooth.py), checked.

Contract: `split_for_dynamic(src, dst, feeds, workdir=...)` measures max|x_j| of every activation a
weight MatMul reads in one float run over `feeds` (up to `MAX_FEEDS` batches: the search's part,
never the held-out one), picks the outlier channels, rewrites the model and writes it to `dst`;
then runs the rewrite on the first feed and keeps it only if every output agrees within float32
tolerance with the source's (taken from the maxima's run: no second session of the source).
Returns a `Split` (the model to quantize, the float MatMuls to exclude, notes); nothing to
rewrite, a model with external data, or a rewrite that does not agree: `src`, unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.runtime import adapt_feed, session
from onnxport.core.io.external_data import has_external
from onnxport.core.quantize.outlier_split import chosen_channels, float_parts, split_outliers, weight_matmuls
from onnxport.core.quantize.smooth import rescaled_count, smooth

MAX_FEEDS = 8
GATHER_LAST_AXIS_OPSET = 11  # Gather(axis=-1): negative axes from opset 11 (older models: smoothing only)
RTOL, ATOL = 1e-3, 1e-4  # float32 re-association of a sum of a few hundred products


@dataclass
class Split:
    path: Path
    float_nodes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def channel_maxima(model: onnx.ModelProto, feeds: Iterable[dict], workdir: Path | None = None,
                   max_feeds: int = MAX_FEEDS, first_outputs: dict | None = None) -> dict[str, np.ndarray]:
    """max|x_j| per last-axis channel of each activation read by a weight MatMul, over `feeds`.
    `first_outputs`: filled with the model's own outputs on the first feed (the same run)."""
    names = list(weight_matmuls(model.graph))
    if not names:
        return {}
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = [o.name for o in probe.graph.output]
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in have)
    sess = session(probe, label="float model (MatMul inputs exposed)", workdir=workdir)
    del probe
    peaks: dict[str, np.ndarray] = {}
    for count, feed in enumerate(feeds):
        if count >= max_feeds:
            break
        wanted = names + [n for n in have if n not in names] if count == 0 and first_outputs is not None else names
        values = dict(zip(wanted, sess.run(wanted, adapt_feed(feed, sess))))
        if count == 0 and first_outputs is not None:
            first_outputs.update((n, values[n]) for n in have)
        for name, value in ((n, values[n]) for n in names):
            value = np.asarray(value, np.float32)
            if value.ndim == 0 or not value.size:
                continue
            peak = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            peaks[name] = np.maximum(peaks[name], peak) if name in peaks and peaks[name].shape == peak.shape else peak
    return peaks


def split_for_dynamic(src: Path, dst: Path, feeds, *, workdir: Path | None = None) -> Split:
    """See the module docstring."""
    model = onnx.load_model(str(src), load_external_data=False)
    if has_external(model):
        return Split(src)  # big models: not rewritten (their weights would be read into memory)
    expected: dict = {}  # the source's outputs on the first feed, from the same run
    maxima = channel_maxima(model, feeds, workdir, first_outputs=expected)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    groups = chosen_channels(model, maxima) if opset >= GATHER_LAST_AXIS_OPSET else {}
    added = float_parts(split_outliers(model, groups, maxima)) if groups else []  # maxima: + the masked ones
    smoothed = rescaled_count(smooth(model, maxima))
    if not added and not smoothed:
        return Split(src)
    onnx.save_model(model, str(dst))
    first = next(iter(feeds), None)
    if first is not None and not _agree(dst, first, expected, workdir):
        return Split(src, notes=["outlier channels: the rewritten float model did not match the source; "
                                 "quantized as it is"])
    channels = sum(len(g.channels) for g in groups.values())
    notes = [f"outlier channels: {channels} input channel(s) of {len(added)} MatMul(s) computed in float "
             "beside the int8 rest"] if added else []
    if smoothed:
        notes.append(f"smoothed: {smoothed} activation(s) rescaled into their MatMuls' weights before quantizing")
    return Split(dst, added, notes)


def _agree(dst: Path, feed: dict, expected: dict, workdir: Path | None) -> bool:
    """The rewrite's outputs on `feed` equal the source's (`expected`, from the maxima's run)."""
    try:
        after = session(dst, workdir=workdir)
        names = [o.name for o in after.get_outputs()]
        if sorted(names) != sorted(expected):
            return False
        got = after.run(names, adapt_feed(feed, after))
    except Exception:  # noqa: BLE001 - ORT refusing the rewrite means it is not equivalent
        return False
    return all(_close(g, expected[n]) for n, g in zip(names, got))


def _close(got, expected) -> bool:
    got, expected = np.asarray(got), np.asarray(expected)
    if expected.dtype.kind != "f" or not expected.size:
        return bool(np.array_equal(got, expected))
    scale = max(1.0, float(np.abs(expected).max()))
    return bool(np.allclose(got, expected, rtol=RTOL, atol=ATOL * scale))
