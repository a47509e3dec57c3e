"""One quantization attempt per mode: float32 model in, quantized/converted model file out.

Each function reads `src` and writes `dst` (+ `dst.data` when `big`), `exclude`'s nodes in float:
- dynamic: ORT's `quantize_dynamic` (ort_dynamic.py), int8 weights, activations quantized at run time; MatMul, Gather,
  Attention, LSTM, EmbedLayerNormalization by default, never Conv (no int8 ConvInteger on CPU);
  MatMuls of two activations and If/Loop/Scan bodies stay float. `dynamic_source` first moves
  outlier input channels into float MatMuls beside them (outlier_plan.py, exact in float).
- static: ORT's QDQ quantizer (ort_static.py), uint8 activations, int8 weights, ranges from
  `calibration.calibrate` computed once; Conv, MatMul, Gemm by default (`STATIC_OP_TYPES`: the
  ones with int8 kernels, the rest stays float); main graph only (gain.static_reach); Gemm biases written 1-D first (gemm_bias.py).
- fp16: our converter, float32 kept where values pass float16's range or the CPU provider refuses
  an op (fp16_mode.py).
- int4: weight-only 4-bit MatMulNBits for the large MatMul weights (int4.py).
Every written model declares only the operator domains it uses (domains.py).
"""

from __future__ import annotations

from pathlib import Path

import onnx

from onnxport.core.evaluate.runtime import load_full
from onnxport.core.graph.runnable import topological_sort
from onnxport.core.graph.uses import has_bodies
from onnxport.core.quantize.domains import declare_used_domains, drop_unused_domains
from onnxport.core.quantize.gemm_bias import flatten_gemm_biases
from onnxport.core.quantize.int4 import int4  # noqa: F401 - the int4 mode, called as modes.int4
from onnxport.core.quantize.outlier_split import SUFFIX as OUTLIER_SUFFIX
from onnxport.core.util.errors import OnnxportError

DYNAMIC_OP_TYPES = ("MatMul", "Gather", "Attention", "LSTM", "EmbedLayerNormalization")
NO_DYNAMIC = {"Conv", "ConvTranspose"}
SAVE_EXTERNAL_BYTES = 1536 << 20


def check_op_types(mode: str, op_types: list[str] | None) -> None:
    if mode == "dynamic" and op_types and NO_DYNAMIC & set(op_types):
        raise OnnxportError("dynamic quantization cannot quantize Conv for ONNX Runtime's CPU provider "
                            "(no ConvInteger kernel for int8 weights)", hint="use --mode static for Conv layers")


def dynamic(src: Path, dst: Path, *, op_types, per_channel: bool, reduce_range: bool, exclude: list[str],
            big: bool, subgraphs: bool | None = None, outlier_parts: list[str] | None = None) -> None:
    """`subgraphs`: whether the model has If/Loop/Scan bodies to quantize too; `outlier_parts`: its
    float MatMuls beside the outlier channels (`dynamic_parts`; None: `src` is read to find both)."""
    from onnxruntime.quantization import QuantType

    from onnxport.core.quantize.ort_dynamic import quantize_dynamic

    if subgraphs is None or outlier_parts is None:
        bodies, parts = dynamic_parts(onnx.load_model(str(src), load_external_data=False))
        subgraphs = bodies if subgraphs is None else subgraphs
        outlier_parts = parts if outlier_parts is None else outlier_parts
    options = {"MatMulConstBOnly": True, **({"EnableSubgraph": True} if subgraphs else {})}
    quantize_dynamic(
        src, dst, op_types_to_quantize=list(op_types or DYNAMIC_OP_TYPES), per_channel=per_channel,
        reduce_range=reduce_range, weight_type=QuantType.QInt8, nodes_to_exclude=list(exclude) + outlier_parts,
        use_external_data_format=big, extra_options=options,
    )
    tidy_written(dst)


def dynamic_parts(model: onnx.ModelProto) -> tuple[bool, list[str]]:
    """(whether the main graph has If/Loop/Scan bodies, its outlier channels' float MatMuls: float by design)."""
    return (any(has_bodies(n) for n in model.graph.node),
            [n.name for n in model.graph.node if n.name.endswith(OUTLIER_SUFFIX)])


def dynamic_source(prepared: Path, feeds, dst: Path, notes: list[str], op_types, big: bool) -> Path:
    """The model the dynamic attempts quantize: `prepared` with its weight MatMuls' outlier input
    channels split off into float MatMuls (written to `dst`, checked equal in float), or `prepared`
    itself (MatMul not quantized, a big model, nothing to split). `feeds`: the search's part only."""
    if big or (op_types and "MatMul" not in op_types):
        return prepared
    from onnxport.core.quantize.outlier_plan import split_for_dynamic

    split = split_for_dynamic(prepared, dst, feeds, workdir=dst.parent)
    notes += split.notes
    return split.path


def has_subgraphs(path: Path) -> bool:
    model = onnx.load_model(str(path), load_external_data=False)
    return any(has_bodies(n) for n in model.graph.node)


def tidy_written(path: Path) -> None:
    """Rewrite the model file at `path` declaring exactly the domains it uses, its nodes in topological
    order (weights untouched): quantizing inside a body, ORT's quantizer appends the
    DynamicQuantizeLinear of a value the body captures *after* the If/Loop node in the outer graph
    (ORT runs it; onnx.checker and the spec refuse it)."""
    model = onnx.load_model(str(path), load_external_data=False)
    changed = drop_unused_domains(model).changed | declare_used_domains(model).changed
    if topological_sort(model.graph) or changed:
        onnx.save_model(model, str(path))


# ONNX Runtime's CPU provider fuses DQ -> op -> Q into an int8 kernel for these (QLinearConv, QGemm,
# QLinearMatMul); Q/DQ around anything else (Add, Mul, Resize, ConvTranspose in 1.32...) is extra
# work on float values: ORT's quantize_static, which quantizes every op, ran slower than float
STATIC_OP_TYPES = ("Conv", "MatMul", "Gemm")


def static_op_types(op_types) -> list[str]:
    """The op types a static attempt quantizes: the user's, else `STATIC_OP_TYPES`."""
    return list(op_types) if op_types else list(STATIC_OP_TYPES)


STATIC_OPTIONS = {"ActivationSymmetric": False, "WeightSymmetric": True}


def static(src: Path, dst: Path, *, tensors_range, op_types, per_channel: bool, reduce_range: bool,
           exclude: list[str], big: bool) -> None:
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization.quant_utils import load_model_with_shape_infer

    from onnxport.core.quantize.ort_static import ChannelQDQQuantizer

    model = load_model_with_shape_infer(Path(src))
    if per_channel and _opset(model) < AXIS_OPSET:
        raise OnnxportError(f"{src.name}: per-channel static quantization needs opset {AXIS_OPSET} "
                            f"(this model has {_opset(model)}): convert it first (modes.with_axis_opset)")
    other_biases = bool(flatten_gemm_biases(model).notes)  # ORT 1.32's int32-bias check reads biases as 1-D
    options = {**STATIC_OPTIONS, **({"QDQDisableWeightAdjustForInt32Bias": True} if other_biases else {})}
    quantizer = ChannelQDQQuantizer(model, per_channel, reduce_range, QuantType.QInt8, QuantType.QUInt8, tensors_range,
                             [], list(exclude), static_op_types(op_types), options)
    quantizer.quantize_model()
    quantizer.model.save_model_to_file(str(dst), big)
    tidy_written(dst)


AXIS_OPSET = 13  # QuantizeLinear/DequantizeLinear take `axis` (per-channel scales) from opset 13


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), AXIS_OPSET)


def with_axis_opset(src: Path, dst: Path, big: bool, notes: list[str]) -> Path:
    """`src`, or its opset-13 conversion written to `dst`: per-channel QDQ writes DequantizeLinear(axis=...),
    which opsets below 13 refuse (ORT's quantizer writes it anyway, and ORT cannot load the result).
    Convert before calibrating: the converter renames some tensors (e.g. around Softmax)."""
    model = load_full(src)
    opset = _opset(model)
    if opset >= AXIS_OPSET:
        return src
    from onnx import version_converter

    try:
        converted = version_converter.convert_version(model, AXIS_OPSET)
    except Exception as exc:  # noqa: BLE001 - the converter raises bare RuntimeErrors/ValueErrors
        raise OnnxportError(f"{src.name}: per-channel static quantization needs opset {AXIS_OPSET}; converting "
                            f"from opset {opset} failed ({str(exc).splitlines()[0][:200]})",
                            hint="quantize per-tensor (without --per-channel)") from None
    if big:
        onnx.save_model(converted, str(dst), save_as_external_data=True, location=dst.name + ".data")
    else:
        onnx.save_model(converted, str(dst))
    notes.append(f"converted from opset {opset} to {AXIS_OPSET} for per-channel weight scales")
    return dst
