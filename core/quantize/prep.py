"""Pre-processing before quantization: ONNX Runtime's graph optimizer, then ONNX shape inference.

Contract: `preprocess(src, dst)` writes to `dst` the model ONNX Runtime's *basic* optimizer makes
of `src` (constant folding - e.g. the `Transpose` of every weight a training-mode export leaves,
which a quantizer would otherwise skip -, redundant-node removal, standard fusions; all of it
plain ONNX) with value_info from ONNX shape inference, and tags it as pre-processed. That is
`onnxruntime.quantization.quant_pre_process(..., skip_symbolic_shape=True)`: its symbolic shape
inference, when it fails (it does on a BERT export), writes `sym_shape_infer_temp.onnx` into the
current directory, which an app must never do. It declares only the operator domains it uses (the
optimizer adds seven). Files are written only at `dst` (and `dst.data` for models over 1.5 GB or
with external data: ORT's optimized model would otherwise name the source's data file, which is
not beside `dst`). Returns notes on what was skipped; a model the optimizer cannot
handle is copied as is (quantization still works, maybe with fewer weights quantized).
`map_node_names(names, original, prepared, notes)`: the user's node names in the pre-processed model.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx

from onnxport.core.evaluate.runtime import model_size, session_options
from onnxport.core.graph.uses import used_names
from onnxport.core.io.model_io import load_graph
from onnxport.core.quantize import gain
from onnxport.core.quantize.domains import drop_unused_domains
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.text import first_line

BIG_MODEL_BYTES = 1536 << 20  # above this, write the optimized model with external data
PRE_PROCESS_KEY = "onnx.quant.pre_process"  # what ORT's quantizer looks for before warning
FIRST_IR_WITHOUT_INITIALIZER_INPUTS = 4  # before IR 4 every initializer is a graph input too


def preprocess(src: Path, dst: Path, *, big: bool | None = None) -> list[str]:
    """`big`: whether `src` is over `BIG_MODEL_BYTES` or has external data (None: looked up)."""
    import onnxruntime as ort

    notes: list[str] = []
    if big is None:
        big = model_size(src) > BIG_MODEL_BYTES or _has_external_data(src)
    so = session_options()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(dst)
    if big:
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", dst.name + ".data")
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    try:
        ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
        if not dst.is_file():
            raise RuntimeError("no optimized model written")
    except Exception as exc:  # noqa: BLE001 - any optimizer failure: quantize the model as it is
        notes.append(f"ONNX Runtime's optimizer skipped ({first_line(exc, 200)})")
        _copy_model(src, dst)
    try:
        onnx.shape_inference.infer_shapes_path(str(dst), str(dst))
    except Exception as exc:  # noqa: BLE001 - shape inference is best effort
        notes.append(f"ONNX shape inference skipped ({first_line(exc, 200)})")
    model = onnx.load_model(str(dst), load_external_data=False)
    dropped = drop_unused_domains(model).changed  # ORT's optimizer declares domains it does not use
    if model.ir_version < FIRST_IR_WITHOUT_INITIALIZER_INPUTS:
        # ORT's optimizer writes the initializers it makes (fused Conv+BN weights...) without graph
        # inputs, which IR 3 forbids: onnx's version converter (ORT's quantizer runs it on opsets
        # below 11) then failed with "Input ... is undefined". IR 4 reads the same graph as meant,
        # its initializers constants, not inputs (a quantizer that drops an initializer it made
        # unused would leave its input behind, required and never fed).
        # The optimizer also drops the initializers it folded away but keeps their inputs: those are
        # left out too (the source's constants, that nothing reads any more).
        model.ir_version = FIRST_IR_WITHOUT_INITIALIZER_INPUTS
        constants = {t.name for t in model.graph.initializer}
        constants |= {t.name for t in onnx.load_model(str(src), load_external_data=False).graph.initializer} \
            - used_names(model.graph)
        inputs = [vi for vi in model.graph.input if vi.name not in constants]
        del model.graph.input[:]
        model.graph.input.extend(inputs)
        dropped = True
    if dropped or not any(p.key == PRE_PROCESS_KEY for p in model.metadata_props):
        if not any(p.key == PRE_PROCESS_KEY for p in model.metadata_props):
            model.metadata_props.add(key=PRE_PROCESS_KEY, value="onnxruntime.quant")
        onnx.save_model(model, str(dst))  # external tensors stay references to dst's data file
    return notes


def _has_external_data(src: Path) -> bool:
    model = onnx.load_model(str(src), load_external_data=False)
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _copy_model(src: Path, dst: Path) -> None:
    """Copy a model and its external data under `dst`'s name (locations rewritten)."""
    model = onnx.load_model(str(src), load_external_data=False)
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if not external:
        shutil.copyfile(src, dst)
        return
    onnx.external_data_helper.load_external_data_for_model(model, str(src.parent))
    onnx.save_model(model, str(dst), save_as_external_data=True, location=dst.name + ".data")


def map_node_names(names: list[str], original: Path, prepared: Path, notes: list[str]) -> list[str]:
    """Node names of the original model -> names in the pre-processed one (ORT's fusions rename
    a node `n` to `n/<Fusion>/`). Unknown names are an error; fused-away ones are noted."""
    if not names:
        return names
    import difflib

    before = node_names(original)
    after = node_names(prepared) if prepared != original else before
    after_set = set(after)
    mapped: list[str] = []
    for name in names:
        if name in after_set:
            mapped.append(name)
            continue
        if name not in before:
            close = difflib.get_close_matches(name, before, n=3)
            raise OnnxportError(f"{original.name}: no node named '{name}' to keep in float"
                                + (f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""))
        renamed = [a for a in after if a.startswith(name + "/")]
        if renamed:
            mapped += renamed
        else:
            notes.append(f"node '{name}' was folded away by pre-processing; nothing to keep in float")
    return list(dict.fromkeys(mapped))


def node_names(path: Path) -> list[str]:
    """Names of the nodes of every graph, If/Loop/Scan bodies included (the quantizers read bodies)."""
    return [n.name for g in gain.all_graphs(load_graph(path)) for n in g.node]
