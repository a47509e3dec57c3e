"""One quantization attempt per mode: float32 model in, quantized/converted model file out.

Contract: each function reads `src` and writes `dst` (plus `dst.data` when `big`), keeping the
float nodes named in `exclude` in float, and nothing else. What each mode does:
- dynamic: `quantize_dynamic`, int8 weights, uint8 activations quantized at run time. Op types
  default to MatMul (ORT rewrites Gemm to MatMul + Add itself), Gather (embedding tables),
  Attention, LSTM, EmbedLayerNormalization; never Conv: ORT's CPU provider has no ConvInteger for
  int8 weights, so a dynamically quantized CNN would not load (Conv goes through static/QDQ).
  MatMuls of two activations stay float (`MatMulConstBOnly`).
- static: QDQ form (QuantizeLinear/DequantizeLinear pairs ORT fuses into integer kernels), uint8
  activations, int8 weights, with ranges from `calibration.calibrate` computed once and reused.
- fp16: `onnxruntime.transformers.float16` (no extra package), optional float I/O, op and node
  block lists; op types the CPU provider then refuses are added to the block list and retried.
"""

from __future__ import annotations

import re
from pathlib import Path

import onnx

from onnxport.core.evaluate.runtime import load_full, session
from onnxport.core.util.errors import OnnxportError

DYNAMIC_OP_TYPES = ("MatMul", "Gather", "Attention", "LSTM", "EmbedLayerNormalization")
NO_DYNAMIC = {"Conv", "ConvTranspose"}
SAVE_EXTERNAL_BYTES = 1536 << 20


def check_op_types(mode: str, op_types: list[str] | None) -> None:
    if mode == "dynamic" and op_types and NO_DYNAMIC & set(op_types):
        raise OnnxportError("dynamic quantization cannot quantize Conv for ONNX Runtime's CPU provider "
                            "(no ConvInteger kernel for int8 weights)", hint="use --mode static for Conv layers")


def dynamic(src: Path, dst: Path, *, op_types, per_channel: bool, reduce_range: bool, exclude: list[str],
            big: bool) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(src), str(dst), op_types_to_quantize=list(op_types or DYNAMIC_OP_TYPES), per_channel=per_channel,
        reduce_range=reduce_range, weight_type=QuantType.QInt8, nodes_to_exclude=list(exclude),
        use_external_data_format=big, extra_options={"MatMulConstBOnly": True},
    )


def static_op_types(op_types) -> list[str]:
    if op_types:
        return list(op_types)
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return sorted(set(QDQRegistry) | set(QLinearOpsRegistry))


STATIC_OPTIONS = {"ActivationSymmetric": False, "WeightSymmetric": True}


def static(src: Path, dst: Path, *, tensors_range, op_types, per_channel: bool, reduce_range: bool,
           exclude: list[str], big: bool) -> None:
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization.qdq_quantizer import QDQQuantizer
    from onnxruntime.quantization.quant_utils import load_model_with_shape_infer

    model = load_model_with_shape_infer(Path(src))
    quantizer = QDQQuantizer(model, per_channel, reduce_range, QuantType.QInt8, QuantType.QUInt8, tensors_range,
                             [], list(exclude), static_op_types(op_types), dict(STATIC_OPTIONS))
    quantizer.quantize_model()
    quantizer.model.save_model_to_file(str(dst), big)


_NOT_IMPLEMENTED = re.compile(r"Could not find an implementation for (\w+)\(")


def fp16(src: Path, dst: Path, *, keep_io_types: bool, block_ops, exclude: list[str], big: bool) -> list[str]:
    """Convert; returns op types that had to be blocked (kept float) for the CPU provider."""
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    blocked: list[str] = []
    source = load_full(src)
    for _ in range(8):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        converted = convert_float_to_float16(
            model, keep_io_types=keep_io_types, disable_shape_infer=big,
            op_block_list=sorted(set(DEFAULT_OP_BLOCK_LIST) | set(block_ops) | set(blocked)),
            node_block_list=list(exclude),
        )
        if big:
            onnx.save_model(converted, str(dst), save_as_external_data=True, location=dst.name + ".data")
        else:
            onnx.save_model(converted, str(dst))
        try:
            session(dst)
            return blocked
        except OnnxportError as exc:
            found = _NOT_IMPLEMENTED.search(str(exc))
            if not found or found.group(1) in blocked:
                raise
            blocked.append(found.group(1))
    raise OnnxportError(f"{src}: no float16 version ONNX Runtime's CPU provider runs (blocked {', '.join(blocked)})")
