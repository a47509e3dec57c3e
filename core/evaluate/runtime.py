"""ONNX Runtime sessions for validation, quantization and benchmarks, with one-line errors.

`session(model)` opens a CPU session from a path or an in-memory model (models over protobuf's
limit go through a file with external data in `workdir`); load failures become `OnnxportError`
naming the file. `run(sess, outputs, feed, label=...)` runs it; a failure becomes one line
naming the model and the input shapes that caused it (ORT's own log stays quiet: severity fatal).
`model_size` counts a model file plus its external-data files. `precision_of`
tells whether a model is float32, quantized or float16 (validation picks its thresholds from it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import EncodeError

from onnxport.core.graph.uses import walk_bodies
from onnxport.core.io.external_data import has_external
from onnxport.core.io.model_io import check_model_file, load_graph
from onnxport.core.util.background import allowed_cpu_count
from onnxport.core.util.errors import OnnxportError, no_such_file
from onnxport.core.util.text import clipped, first_line

SESSION_BYTES_LIMIT = (2**31 - 1) - (64 << 20)
# where ORT resolves the external data of a model given as bytes (it refuses absolute locations)
EXTERNAL_FOLDER_KEY = "session.model_external_initializers_file_folder_path"
ALLOW_SPINNING_KEY = "session.intra_op.allow_spinning"

QUANTIZED_OPS = {
    "DynamicQuantizeLinear", "QuantizeLinear", "DequantizeLinear", "MatMulInteger", "ConvInteger",
    "QLinearConv", "QLinearMatMul", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QAttention",
    "QGemm", "DynamicQuantizeLSTM", "QEmbedLayerNormalization", "MatMulNBits",
}


def _ort():
    import onnxruntime

    return onnxruntime


def intra_op_threads(threads: int | None = None) -> int | None:
    """The intra-op threads a session runs with: `threads`, else as many as this process's allowed
    CPUs when it may use fewer than the machine has (ORT's default counts the machine's cores),
    else None (ORT's default)."""
    return threads or allowed_cpu_count()


def session_options(threads: int | None = None, optimize: bool = True, spinning: bool = False):
    """`spinning`: ORT's default, idle pool threads spin for the next parallel section; off, they
    sleep (the same results: a checking run on a busy machine takes less CPU and wall time; a
    latency measurement keeps ORT's default, as deployed)."""
    ort = _ort()
    so = ort.SessionOptions()
    so.log_severity_level = 4  # errors come back as exceptions; ORT's own log would add lines
    if not spinning:
        so.add_session_config_entry(ALLOW_SPINNING_KEY, "0")
    threads = intra_op_threads(threads)
    if threads:
        so.intra_op_num_threads = int(threads)
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return so


def serialized_within_limit(model: onnx.ModelProto) -> bytes | None:
    """The model's bytes, or None past SESSION_BYTES_LIMIT (protobuf cannot write 2 GB).

    Serialized once: upb's `ByteSize()` serializes the whole model to measure it, so asking the
    size first wrote every weight twice (a transient copy of the weights)."""
    try:
        data = model.SerializeToString()
    except EncodeError:
        return None
    return data if len(data) <= SESSION_BYTES_LIMIT else None


def session(model: str | Path | onnx.ModelProto, *, label: str | None = None, threads: int | None = None,
            workdir: Path | None = None, optimize: bool = True, checked: bool = False,
            external_folder: Path | None = None, spinning: bool = False):
    """An `InferenceSession` on the CPU provider; `OnnxportError` if ONNX Runtime refuses the model.

    ORT reads a model path's external data itself: the file's references are checked first
    (confined to its folder, see external_data.py) unless the caller just did (`checked`). A
    ModelProto may keep external references (e.g. a pruned graph whose weights stay on disk): then
    `external_folder` is the folder they were checked against, where ORT reads them."""
    ort = _ort()
    so = session_options(threads, optimize, spinning)
    source: str | bytes
    if isinstance(model, onnx.ModelProto):
        label = label or model.graph.name or "model"
        if external_folder is not None:
            so.add_session_config_entry(EXTERNAL_FOLDER_KEY, str(external_folder))
        elif has_external(model):
            raise ValueError(f"{label}: a model with external data given without its folder")
        source = serialized_within_limit(model)
        if source is None:
            if workdir is None:
                raise OnnxportError(f"{label}: over 2 GB in memory and no work folder to spill it to")
            spill = Path(workdir) / f"{abs(hash(label))}.session.onnx"
            onnx.save_model(model, spill, save_as_external_data=True, location=spill.name + ".data")
            source = str(spill)
    else:
        label = label or str(model)
        if not Path(model).is_file():
            raise no_such_file(model)
        if not checked:
            check_model_file(model)
        source = str(model)
    try:
        return ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - ORT raises several Fail/InvalidGraph/NotImplemented types
        raise OnnxportError(f"{label}: ONNX Runtime cannot run this model: {ort_reason(exc)}") from None


def describe_feed(feed: Mapping[str, np.ndarray]) -> str:
    """'x[2, 3, 224, 224], sr=16000': the shapes of a feed (and the value of its scalars)."""
    return ", ".join(f"{k}={np.asarray(v).item()}" if np.ndim(v) == 0 else f"{k}{list(np.shape(v))}"
                     for k, v in feed.items())


def ort_reason(exc: BaseException, limit: int = 400) -> str:
    """ORT's error as the reason it gives: its first line without boilerplate (`ort_message`), then
    `clipped` to `limit` keeping its end (where ORT says what is wrong)."""
    return clipped(ort_message(first_line(exc, 1 << 20)), limit)


def ort_message(text: str) -> str:
    """ORT's error line without its boilerplate: '[ONNXRuntimeError] : 1 : FAIL : ', 'Load model
    from <path> failed:' (the path the message around it names already), source paths and C++
    signatures (what is left names the node and what was wrong)."""
    text = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"^\s*Load model from .*? failed:\s*", "", text)
    text = re.sub(r"\S*onnxruntime_src/\S+:\d+ ", "", text)
    return re.sub(r"(?:\b[\w:<>]+ )?\bonnxruntime::[\w:<>]+\([^)]*\)(?: const)? ", "", text).strip()


def run(sess, outputs: list[str] | None, feed: Mapping[str, np.ndarray], *, label: str, hint: str | None = None,
        shown: Iterable[str] | None = None):
    """`sess.run(outputs, feed)`; ORT's failure as `OnnxportError` naming `label` and the shapes of
    the feed (of its `shown` entries: the data inputs, not the parameters fed beside them)."""
    try:
        return sess.run(outputs, dict(feed))
    except Exception as exc:  # noqa: BLE001 - ORT raises Fail/InvalidArgument/RuntimeException...
        described = describe_feed(feed if shown is None else {k: feed[k] for k in shown if k in feed})
        raise OnnxportError(f"{label}: ONNX Runtime failed on inputs {described}: {ort_reason(exc, 600)}",
                            hint=hint) from None


def load_full(path: str | Path) -> onnx.ModelProto:
    """Load a model with its external data (for tools that need the weights in memory)."""
    path = Path(path)
    model = load_graph(path)
    if has_external(model):  # references already confined to the folder by load_graph
        try:
            onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
        except (OSError, ValueError) as exc:
            raise OnnxportError(f"{path}: cannot read its external data ({exc})") from None
    return model


def load_weights(model: onnx.ModelProto, folder: Path) -> None:
    """Read the external data of a graph loaded (and checked) from `folder` into the graph itself."""
    if has_external(model):
        try:
            onnx.external_data_helper.load_external_data_for_model(model, str(folder))
        except (OSError, ValueError) as exc:
            raise OnnxportError(f"{folder}: cannot read external data ({exc})") from None


def model_size(path: str | Path) -> int:
    """Bytes of a model file plus the external-data files it refers to."""
    path = Path(path)
    total = path.stat().st_size
    model = load_graph(path)
    locations = {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"}
    for name in locations:
        data = path.parent / name
        if data.is_file():
            total += data.stat().st_size
    return total


def precision_of(model: onnx.ModelProto) -> str:
    """'quantized', 'float16' or 'float32' from the ops and initializer types of a model (its If/Loop/Scan
    bodies included: a recurrent model's weights and quantized ops may all sit there)."""
    graphs = [model.graph] + [body for _, _, _, body in walk_bodies(model.graph)]
    if any(n.op_type in QUANTIZED_OPS for g in graphs for n in g.node):
        return "quantized"
    if any(t.data_type == onnx.TensorProto.FLOAT16 for g in graphs for t in g.initializer) or any(
        n.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16 for a in n.attribute)
        for g in graphs for n in g.node
    ):
        return "float16"
    return "float32"


_ORT_TYPES = {
    "tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
    "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int16)": "int16", "tensor(int8)": "int8",
    "tensor(uint8)": "uint8", "tensor(uint16)": "uint16", "tensor(uint32)": "uint32", "tensor(uint64)": "uint64",
    "tensor(bool)": "bool",
}


def adapt_feed(feed: dict[str, np.ndarray], sess) -> dict[str, np.ndarray]:
    """The part of `feed` a session takes, cast to its input types (e.g. float16 I/O models)."""
    out = {}
    for inp in sess.get_inputs():
        if inp.name not in feed:
            continue
        value = feed[inp.name]
        want = _ORT_TYPES.get(inp.type)
        if want and value.dtype != np.dtype(want):
            value = value.astype(want)
        out[inp.name] = value
    return out
