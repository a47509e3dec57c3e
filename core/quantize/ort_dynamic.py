"""ONNX Runtime's `quantize_dynamic`, its per-channel weight loop done on whole weights at once.

Contract: `quantize_dynamic(...)` takes `onnxruntime.quantization.quantize_dynamic`'s arguments and
writes the very same file (same bytes). ORT's quantizer computes each weight channel's scale, zero
point and int8 values in a Python loop (`BaseQuantizer.quantize_weight_per_channel_impl`, a few
numpy calls per channel: most of the quantizer's time on a transformer); `ChannelQuantizer` does
the same arithmetic (ORT's `compute_scale_zp` and `quantize_nparray`, in the same dtypes) over
every channel in one pass. Anything else (overrides, 4/16-bit or float16 weights, a minimum real
range, an empty weight) goes to ORT's own loop.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization.onnx_quantizer import ONNXQuantizer
from onnxruntime.quantization.quant_utils import (
    TENSOR_NAME_QUANT_SUFFIX,
    QuantizationMode,
    QuantType,
    add_infer_metadata,
    find_by_name,
    get_qmin_qmax_for_qType,
    normalize_axis,
    tensor_proto_to_array,
    update_opset_version,
)
from onnxruntime.quantization.registry import IntegerOpsRegistry

FAST_TYPES = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)


def quantize_dynamic(model_input: Path, model_output: Path, *, op_types_to_quantize, per_channel: bool,
                     reduce_range: bool, weight_type: QuantType, nodes_to_exclude: list[str],
                     use_external_data_format: bool, extra_options: dict) -> None:
    """ORT 1.32's `quantize_dynamic` for a model path, with `ChannelQuantizer` (no warning logged)."""
    extra_options = {"MatMulConstBOnly": True, **extra_options}
    model = onnx.load_model(str(model_input))
    add_infer_metadata(model)  # ONNXQuantizer infers shapes itself, once (`load_model_with_shape_infer` did it twice)
    model = update_opset_version(model, weight_type)
    quantizer = ChannelQuantizer(model, per_channel, reduce_range, QuantizationMode.IntegerOps, False, weight_type,
                                 QuantType.QUInt8, None, [], list(nodes_to_exclude),
                                 list(op_types_to_quantize or IntegerOpsRegistry.keys()), extra_options)
    quantizer.quantize_model()
    quantizer.model.save_model_to_file(str(model_output), use_external_data_format)


class ChannelQuantizer(ONNXQuantizer):
    """ORT's dynamic quantizer; plain per-channel int8/uint8 float32 weights quantized in one pass."""

    def quantize_weight_per_channel_impl(self, weight_name, weight_qType, channel_axis, reduce_range=True,  # noqa: N803
                                         keep_float_weight=False):
        initializer = find_by_name(weight_name, self.model.initializer())
        if initializer is None or not self._plain(weight_name, weight_qType, initializer, channel_axis):
            return super().quantize_weight_per_channel_impl(weight_name, weight_qType, channel_axis, reduce_range,
                                                            keep_float_weight)
        weights = tensor_proto_to_array(initializer)
        axis = normalize_axis(channel_axis, weights.ndim)[1]
        symmetric = self.is_weight_symmetric(weight_qType)
        zero_points, scales, quantized = channel_quantized(weights, axis, weight_qType, symmetric,
                                                           self.reduce_range and reduce_range)
        q_name, zp_name, scale_name = weight_name + TENSOR_NAME_QUANT_SUFFIX, f"{weight_name}_zero_point", \
            f"{weight_name}_scale"
        shape = [initializer.dims[axis]]
        self.model.initializer_extend([
            onnx.helper.make_tensor(scale_name, initializer.data_type, shape, scales.tolist()),
            onnx.helper.make_tensor(zp_name, weight_qType, shape, zero_points.tolist())])
        if not keep_float_weight:
            self.model.initializer_extend([onnx.numpy_helper.from_array(quantized.reshape(initializer.dims), q_name)])
        return q_name, zp_name, scale_name

    def _plain(self, weight_name, weight_qType, initializer, channel_axis) -> bool:  # noqa: N803
        """Whether ORT's loop would take its default branch for every channel of this weight."""
        if weight_qType not in FAST_TYPES or initializer.data_type != onnx.TensorProto.FLOAT:
            return False
        if self.min_real_range is not None or 0 in initializer.dims:
            return False
        valid, axis = normalize_axis(channel_axis, len(initializer.dims))
        overrides = self.tensor_quant_overrides.get_per_channel_overrides(weight_name, default_val=[{"axis": axis}])
        return valid and overrides == [{"axis": axis}]


def channel_params(flat: np.ndarray, qtype: int, symmetric: bool, reduce_range: bool) -> tuple[np.ndarray, np.ndarray]:
    """(zero points, float32 scales) of each row of `flat` (a channel's values): ORT's
    `compute_scale_zp`, element for element in the same dtypes."""
    qmin, qmax = get_qmin_qmax_for_qType(qtype, reduce_range, symmetric=symmetric)
    rmin = np.minimum(flat.min(axis=1), np.float32(0))
    rmax = np.maximum(flat.max(axis=1), np.float32(0))
    if symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -absmax, +absmax
    scale = (rmax.astype(np.float64) - rmin.astype(np.float64)) / (np.float64(qmax) - np.float64(qmin))
    tiny = scale < np.finfo(np.float32).tiny
    if symmetric:
        zero = np.full(scale.shape, np.round((qmin + qmax) / np.array(2.0, dtype=np.float64)), dtype=qmin.dtype)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):  # the tiny channels' zero point is 0 below
            zero = np.round(qmin - rmin / scale).astype(qmin.dtype)
    stored = np.where(tiny, np.float32(1.0), scale.astype(np.float32))
    return np.where(tiny, np.zeros((), qmin.dtype), zero), stored


def channel_rounded(weights: np.ndarray, axis: int, qtype: int, zero: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """`weights` quantized with a zero point and scale per channel along `axis`: ORT's
    `quantize_nparray` per channel, element for element in the same dtypes."""
    rows = np.moveaxis(weights, axis, 0)
    flat = rows.reshape(rows.shape[0], -1)
    low, high = get_qmin_qmax_for_qType(qtype, reduce_range=False, symmetric=False)
    values = (flat.astype(np.float32) / scale[:, None]).round() + zero[:, None]
    np.clip(values, low, high, out=values)
    quantized = values.astype(onnx.helper.tensor_dtype_to_np_dtype(qtype)).reshape(rows.shape)
    return np.moveaxis(quantized, 0, axis)


def channel_quantized(weights: np.ndarray, axis: int, qtype: int, symmetric: bool,
                      reduce_range: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(zero points, float32 scales, quantized weights in `weights`' shape) per channel along `axis`:
    `channel_params`, then ORT's `quantize_nparray` element for element."""
    rows = np.moveaxis(weights, axis, 0)
    flat = rows.reshape(rows.shape[0], -1)
    zero, stored = channel_params(flat, qtype, symmetric, reduce_range)
    return zero, stored, channel_rounded(weights, axis, qtype, zero, stored)


__all__ = ["ChannelQuantizer", "channel_params", "channel_quantized", "channel_rounded", "quantize_dynamic"]
