"""ONNX Runtime's QDQ quantizer, its per-channel weight scales computed on whole weights at once.

Contract: `ChannelQDQQuantizer` takes `QDQQuantizer`'s arguments and writes the very same model
(same bytes). ORT computes each weight channel's scale and zero point, and rounds each channel, in
Python loops (per attempt: most of the quantizer's time on a CNN); plain per-channel int8/uint8
float32 weights (no overrides, no blocks, no minimum real range) get theirs from
`ort_dynamic.channel_params` and `channel_rounded` (ORT's arithmetic, same dtypes); ORT does the rest.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnxruntime.quantization.base_quantizer import QuantizationParams
from onnxruntime.quantization.qdq_quantizer import QDQQuantizer, QDQQuantTensorType, QDQTensorQuantizedValue
from onnxruntime.quantization.quant_utils import (
    TENSOR_NAME_QUANT_SUFFIX,
    QuantizedValue,
    QuantizedValueType,
    add_dequant_output_suffix,
    add_dequant_suffix,
    find_by_name,
    normalize_axis,
    tensor_proto_to_array,
)

from onnxport.core.quantize.ort_dynamic import FAST_TYPES, channel_params, channel_rounded


class ChannelQDQQuantizer(QDQQuantizer):
    """ORT's QDQ quantizer; plain per-channel weights' scales computed in one pass each."""

    def _calc_initializer_quant_params(self) -> dict[str, QuantizationParams]:
        plain = {name: weight for name, info in self.tensors_to_quantize.items()
                 if (weight := self._plain_weight(name, info)) is not None}
        everything = self.tensors_to_quantize
        self.tensors_to_quantize = {k: v for k, v in everything.items() if k not in plain}
        try:
            params = super()._calc_initializer_quant_params()
        finally:
            self.tensors_to_quantize = everything
        for name, (weight, axis) in plain.items():
            rows = np.moveaxis(tensor_proto_to_array(weight), axis, 0)
            zero, scale = channel_params(rows.reshape(rows.shape[0], -1), self.weight_qType, True, self.reduce_range)
            params[name] = QuantizationParams(zero_point=zero, scale=scale, quant_type=self.weight_qType, axis=axis)
        return {name: params[name] for name in everything if name in params}  # ORT's order

    def _add_qdq_nodes_for_initializer(self, weight_proto: onnx.TensorProto):
        """A plain per-channel weight rounded in one pass (ORT's `quantize_onnx_initializer` loops per
        channel), then ORT's own steps: its scale and zero point, the DequantizeLinear, the record."""
        name = weight_proto.name
        params = self.initializer_quant_params.get(name)
        if (name in self.quantized_value_map or self.add_qdq_pair_to_weight or params is None
                or params.get("axis") is None or params.get("block_size", 0) or params["quant_type"] not in FAST_TYPES
                or weight_proto.data_type != onnx.TensorProto.FLOAT):
            return super()._add_qdq_nodes_for_initializer(weight_proto)
        axis = params["axis"]
        scale_zp = self._make_scale_zp_initializers(name, params)
        output = add_dequant_output_suffix(name)
        self.model.replace_input_of_all_nodes(name, output)
        rounded = channel_rounded(tensor_proto_to_array(weight_proto), axis, params["quant_type"],
                                  params["zero_point"], params["scale"])
        quant_weight = onnx.numpy_helper.from_array(rounded.reshape(weight_proto.dims), name + TENSOR_NAME_QUANT_SUFFIX)
        self.model.add_initializer(quant_weight)
        self._create_dq_node(quant_weight.name, output, add_dequant_suffix(name), scale_zp.scale.name,
                             scale_zp.zero_point.name, axis=axis, block_size=0)
        value = QuantizedValue(name, quant_weight.name, scale_zp.scale.name, scale_zp.zero_point.name,
                               QuantizedValueType.Initializer, axis=axis)
        self.quantized_value_map[name] = QDQTensorQuantizedValue(value, None, None)
        return None

    def _plain_weight(self, name: str, info) -> tuple[onnx.TensorProto, int] | None:
        """(the weight, its channel axis) when ORT's loop would take its plain per-channel branch."""
        if info.tensor_type is not QDQQuantTensorType.WEIGHT or info.axis is None or self.block_size > 0:
            return None
        if self.weight_qType not in FAST_TYPES or self.min_real_range is not None:
            return None
        if self.tensor_quant_overrides.get(name, [{}]) != [{}]:
            return None
        weight = find_by_name(name, self.model.initializer())
        if weight is None or weight.data_type != onnx.TensorProto.FLOAT or 0 in weight.dims:
            return None
        valid, axis = normalize_axis(info.axis, len(weight.dims))
        return (weight, axis) if valid else None


__all__ = ["ChannelQDQQuantizer"]
