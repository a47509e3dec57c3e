"""A synthetic decoder-only transformer at LLM scale: ~1B parameters in external data, ~23k nodes.

Why: the product's claim is that an LLM export opens, previews and exports at disk speed with
memory far below its weights. Real 1B models are not on this machine (nothing is downloaded), so
this builds one shaped like what exporters write:

- Llama-like blocks: RMSNorm written out as ops, q/k/v/o projections, rotary embedding and causal
  attention *per head* (Slice, rotate-half, MatMul, Softmax... as some exporters decompose it; that
  is what puts ~1,000 nodes in each layer), SiLU-gated MLP, residual Adds. Node names and tensor
  names follow torch.onnx's scopes (`/model/layers.3/self_attn/...`).
- Weights in several external data files, one per layer plus the embeddings and the head, each
  tensor written once with offset and length, as sharded exporters write them. Random values
  scaled by 1/sqrt(fan-in), so activations stay finite through every layer.

`write_decoder(folder, config)` writes `model.onnx` and its data files without ever holding more
than one tensor in memory; it returns a `DecoderFiles` naming them, the parameter bytes in total
and per layer, and the tensor name of each layer's output (for early-exit exports).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper


@dataclass(frozen=True)
class DecoderConfig:
    vocab: int = 32000
    hidden: int = 2048
    heads: int = 32
    ffn: int = 5632
    layers: int = 16
    max_seq: int = 128

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def parameters(self) -> int:
        per_layer = 4 * self.hidden**2 + 3 * self.hidden * self.ffn + 2 * self.hidden
        return 2 * self.vocab * self.hidden + self.layers * per_layer + self.hidden


@dataclass
class DecoderFiles:
    model: Path
    data_files: list[Path]
    param_bytes: int
    layer_outputs: list[str]  # the residual stream after each layer
    bytes_through_layer: list[int] = field(default_factory=list)  # parameters needed up to layer i's output


class _Builder:
    """Collects nodes, and writes each weight straight to its data file as it is declared."""

    def __init__(self, folder: Path, config: DecoderConfig, seed: int = 0) -> None:
        self.folder, self.config = folder, config
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.file: Path | None = None
        self.handle = None
        self.param_bytes = 0
        self.data_files: list[Path] = []
        self.names: dict[tuple[str, str], int] = {}

    def open_file(self, name: str) -> None:
        self.close_file()
        self.file = self.folder / name
        self.handle = open(self.file, "wb")  # noqa: SIM115 - closed by close_file
        self.data_files.append(self.file)

    def close_file(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def weight(self, name: str, shape: tuple[int, ...], scale: float | None = None, ones: bool = False) -> str:
        if ones:
            array = np.ones(shape, np.float32)
        else:
            fan_in = shape[0] if len(shape) > 1 else 1
            array = self.rng.standard_normal(shape, dtype=np.float32)
            array *= np.float32(scale if scale is not None else 1.0 / math.sqrt(fan_in))
        offset = self.handle.tell()
        self.handle.write(array.tobytes())
        tensor = onnx.TensorProto(name=name, data_type=T.FLOAT, dims=list(shape))
        tensor.data_location = T.EXTERNAL
        for key, value in (("location", self.file.name), ("offset", str(offset)), ("length", str(array.nbytes))):
            tensor.external_data.add(key=key, value=value)
        self.initializers.append(tensor)
        self.param_bytes += array.nbytes
        return name

    def inline(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(onnx.numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list[str], scope: str, n_out: int = 1, **attrs) -> str | list[str]:
        seen = self.names.get((scope, op_type), 0)
        self.names[(scope, op_type)] = seen + 1
        name = f"{scope}/{op_type}" if seen == 0 else f"{scope}/{op_type}_{seen}"  # as torch.onnx names them
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, values, scope: str) -> str:
        """An int64 Constant node, as torch.onnx writes shape arguments."""
        array = np.array(values, np.int64)
        name = f"{scope}/Constant_{len(self.nodes)}"
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node("Constant", [], [out], name=name,
                                           value=onnx.numpy_helper.from_array(array)))
        return out


def _rms_norm(b: _Builder, x: str, weight: str, scope: str) -> str:
    square = b.op("Mul", [x, x], scope)
    mean = b.op("ReduceMean", [square], scope, axes=[-1], keepdims=1)
    shifted = b.op("Add", [mean, "eps"], scope)
    root = b.op("Sqrt", [shifted], scope)
    inverse = b.op("Reciprocal", [root], scope)
    return b.op("Mul", [b.op("Mul", [x, inverse], scope), weight], scope)


def _head_slice(b: _Builder, x: str, start: int, end: int, scope: str) -> str:
    return b.op("Slice", [x, b.const([start], scope), b.const([end], scope), b.const([-1], scope)], scope)


def _rotary(b: _Builder, x: str, scope: str) -> str:
    half = b.config.head_dim // 2
    first = _head_slice(b, x, 0, half, scope)
    second = _head_slice(b, x, half, b.config.head_dim, scope)
    rotated = b.op("Concat", [b.op("Neg", [second], scope), first], scope, axis=-1)
    return b.op("Add", [b.op("Mul", [x, "cos"], scope), b.op("Mul", [rotated, "sin"], scope)], scope)


def _attention(b: _Builder, x: str, layer: int) -> str:
    c, scope = b.config, f"/model/layers.{layer}/self_attn"
    prefix = f"model.layers.{layer}.self_attn"
    q, k, v = (b.op("MatMul", [x, b.weight(f"{prefix}.{p}_proj.weight", (c.hidden, c.hidden))], f"{scope}/{p}_proj")
               for p in ("q", "k", "v"))
    heads = []
    for h in range(c.heads):
        head_scope = f"{scope}/head.{h}"
        lo, hi = h * c.head_dim, (h + 1) * c.head_dim
        qh = _rotary(b, _head_slice(b, q, lo, hi, head_scope), head_scope)
        kh = _rotary(b, _head_slice(b, k, lo, hi, head_scope), head_scope)
        vh = _head_slice(b, v, lo, hi, head_scope)
        scores = b.op("MatMul", [qh, b.op("Transpose", [kh], head_scope, perm=[0, 2, 1])], head_scope)
        scaled = b.op("Add", [b.op("Mul", [scores, "scale"], head_scope), "mask"], head_scope)
        heads.append(b.op("MatMul", [b.op("Softmax", [scaled], head_scope, axis=-1), vh], head_scope))
    merged = b.op("Concat", heads, scope, axis=-1)
    return b.op("MatMul", [merged, b.weight(f"{prefix}.o_proj.weight", (c.hidden, c.hidden))], f"{scope}/o_proj")


def _mlp(b: _Builder, x: str, layer: int) -> str:
    c, scope, prefix = b.config, f"/model/layers.{layer}/mlp", f"model.layers.{layer}.mlp"
    gate = b.op("MatMul", [x, b.weight(f"{prefix}.gate_proj.weight", (c.hidden, c.ffn))], f"{scope}/gate_proj")
    silu = b.op("Mul", [gate, b.op("Sigmoid", [gate], f"{scope}/act_fn")], f"{scope}/act_fn")
    up = b.op("MatMul", [x, b.weight(f"{prefix}.up_proj.weight", (c.hidden, c.ffn))], f"{scope}/up_proj")
    both = b.op("Mul", [silu, up], scope)
    return b.op("MatMul", [both, b.weight(f"{prefix}.down_proj.weight", (c.ffn, c.hidden))], f"{scope}/down_proj")


def _positions(b: _Builder) -> None:
    """cos/sin [seq, head_dim] and the causal mask [seq, seq], sliced to the input's length."""
    c, scope = b.config, "/model/rotary_emb"
    inv = 1.0 / (10000 ** (np.arange(0, c.head_dim, 2, dtype=np.float64) / c.head_dim))
    angles = np.outer(np.arange(c.max_seq), inv)
    angles = np.concatenate([angles, angles], axis=-1)
    b.inline("cos_table", np.cos(angles).astype(np.float32))
    b.inline("sin_table", np.sin(angles).astype(np.float32))
    b.inline("mask_table", np.triu(np.full((c.max_seq, c.max_seq), -1e4, np.float32), 1))
    length = b.op("Gather", [b.op("Shape", ["input_ids"], scope), b.const([1], scope)], scope, axis=0)
    zero, one = b.const([0], scope), b.const([1], scope)
    for table, out in (("cos_table", "cos"), ("sin_table", "sin")):
        b.nodes.append(helper.make_node("Slice", [table, zero, length, b.const([0], scope)], [out],
                                        name=f"{scope}/Slice_{out}"))
    rows = b.op("Slice", ["mask_table", zero, length, b.const([0], scope)], "/model/mask")
    b.nodes.append(helper.make_node("Slice", [rows, zero, length, one], ["mask"], name="/model/mask/Slice_cols"))


def write_decoder(folder: Path, config: DecoderConfig = DecoderConfig()) -> DecoderFiles:  # noqa: B008
    """See the module docstring."""
    folder.mkdir(parents=True, exist_ok=True)
    b = _Builder(folder, config)
    c = config
    b.inline("eps", np.array(1e-5, np.float32))
    b.inline("scale", np.array(1.0 / math.sqrt(c.head_dim), np.float32))
    _positions(b)
    b.open_file("embed_tokens.bin")
    table = b.weight("model.embed_tokens.weight", (c.vocab, c.hidden), scale=0.02)
    hidden = b.op("Gather", [table, "input_ids"], "/model/embed_tokens", axis=0)
    layer_outputs, through = [], []
    for layer in range(c.layers):
        b.open_file(f"layers.{layer}.bin")
        prefix, scope = f"model.layers.{layer}", f"/model/layers.{layer}"
        normed = _rms_norm(b, hidden, b.weight(f"{prefix}.input_layernorm.weight", (c.hidden,), ones=True),
                           f"{scope}/input_layernorm")
        hidden = b.op("Add", [hidden, _attention(b, normed, layer)], scope)
        normed = _rms_norm(b, hidden, b.weight(f"{prefix}.post_attention_layernorm.weight", (c.hidden,), ones=True),
                           f"{scope}/post_attention_layernorm")
        hidden = b.op("Add", [hidden, _mlp(b, normed, layer)], scope)
        layer_outputs.append(hidden)
        through.append(b.param_bytes)
    b.open_file("lm_head.bin")
    normed = _rms_norm(b, hidden, b.weight("model.norm.weight", (c.hidden,), ones=True), "/model/norm")
    logits_pre = b.op("MatMul", [normed, b.weight("lm_head.weight", (c.hidden, c.vocab))], "/lm_head")
    b.nodes.append(helper.make_node("Identity", [logits_pre], ["logits"], name="/lm_head/Identity"))
    b.close_file()
    graph = helper.make_graph(
        b.nodes, "decoder", [helper.make_tensor_value_info("input_ids", T.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", "sequence", c.vocab])], b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnxport-bench")
    model.ir_version = 8
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return DecoderFiles(path, b.data_files, b.param_bytes, layer_outputs, through)
