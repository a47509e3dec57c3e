"""What a quantization run is asked to do: one request object instead of ~20 keyword arguments.

Contract: `QuantizeOptions` holds every choice of `quantize(model, out, mode, options)` except the
mode, the paths, progress and cancel; its defaults are `quantize`'s defaults. Frozen: change a copy
with `dataclasses.replace(options, field=value)` (as `requantize` does with its overrides).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnxport.core.evaluate.feeds import FeedsLike
    from onnxport.core.quantize.cpu_int8 import Int8Path


@dataclass(frozen=True)
class QuantizeOptions:
    """The choices of one quantization run (see `quantize.quantize` for what each does)."""

    calibration: FeedsLike = None  # static: the data the ranges come from (else held-out/bundled/generated)
    calibration_required: bool = False  # static: refuse up front when no real calibration data is at hand
    per_channel: bool | None = None  # None: per-channel for int8, falling back per-tensor if it cannot
    reduce_range: bool | None = None  # None: what the CPU's int8 path needs (cpu_int8.py)
    int8_path: str | Int8Path | None = None  # None: this CPU's
    op_types: Iterable[str] | None = None  # None: the mode's op types
    exclude_nodes: Iterable[str] = ()  # node names kept in float
    keep_io_types: bool = True  # fp16: float32 inputs and outputs
    block_ops: Iterable[str] = ()  # fp16: op types kept in float32
    accuracy_target: float | None = 0.99  # cosine per output; None: no target, no search
    validation_inputs: FeedsLike = None
    preprocess: bool = True  # ONNX Runtime's pre-processing (not for fp16)
    tokenizer: str | Path | None = None  # for the bundled sentences of a text model
    block_size: int = 32  # int4
    int4_method: str = "auto"  # int4: rtn, hqq, gptq; auto: gptq with calibration data, else hqq
    symmetric: bool = False  # int4: symmetric blocks (no zero points)
    dim_sizes: dict[str, int] | None = None  # sizes of symbolic dims for generated inputs
    shapes: dict[str, tuple[int, ...]] | None = None  # whole input shapes for generated inputs
