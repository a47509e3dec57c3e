"""ONNX Runtime's QDQ quantizer, its per-channel weight scales computed on whole weights at once.

Contract: `ChannelQDQQuantizer` takes `QDQQuantizer`'s arguments and writes the very same model
(same bytes). ORT computes each weight channel's scale and zero point in a Python loop
(`_calc_initializer_quant_params`, per attempt: most of the quantizer's time on a CNN); plain
per-channel int8/uint8 float32 weights (no overrides, no blocks, no minimum real range) get theirs
from `ort_dynamic.channel_params` (ORT's arithmetic, same dtypes); ORT computes the rest.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnxruntime.quantization.base_quantizer import QuantizationParams
from onnxruntime.quantization.qdq_quantizer import QDQQuantizer, QDQQuantTensorType
from onnxruntime.quantization.quant_utils import find_by_name, normalize_axis, tensor_proto_to_array

from onnxport.core.quantize.ort_dynamic import FAST_TYPES, channel_params


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
