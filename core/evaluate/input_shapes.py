"""Concrete shapes for generated inputs: what the user says, what the model says, then guesses.

Per input and axis, the first source that knows wins:
1. the user: `shapes` (input -> full shape, `--shape x=1x3x48x320`) and `dim_sizes` (symbolic dim
   -> size, `--dim batch=4`; `INPUT:AXIS` names an unnamed axis, `--dim x:2=48`);
2. the model: the fixed sizes of the input's declared type, then shapes in its metadata
   (`<input>.shape`, `<input>_shape`, `input_shape`, `shape`, `image_shape`, `img_shape`);
3. a guess by the axis's kind: the batch axis (named "batch", else the first dynamic one) ->
   `batch`; an image's spatial axes -> 224 rounded up to the model's stride; a dynamic channel
   axis -> 3; any other axis -> 128 (a sequence).
A guess can be wrong for a model; `ShapePlan.choices()` lists the alternatives in order of
likelihood, the default first, and the first-run probe (first_run.py) keeps the first one ONNX
Runtime runs. Nothing is guessed where the user or the model gave sizes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import onnx

from onnxport.core.evaluate.input_specs import InputSpec
from onnxport.core.util.budgets import DIM_MAX
from onnxport.core.util.errors import OnnxportError

BATCH = 2
IMAGE = 224
SEQUENCE = 128
CHANNELS = 3
IMAGE_SIZES = (32, 48, 64, 96, 128, 28, 256, 512)  # tried after the default, in this order
SEQUENCE_SIZES = (256, 512, 64, 32, 16, 8)
MAX_CHOICES = 24
MAX_STRIDE = 512
_NOT_BATCH = ("seq", "len", "token", "time", "step", "frame", "height", "width", "channel", "feature", "hidden")
_STRIDED = {"Conv", "MaxPool", "AveragePool", "LpPool", "ConvInteger", "QLinearConv"}
_META_KEYS = ("{}.shape", "{}_shape", "input_shape", "shape", "image_shape", "img_shape")


@dataclass(frozen=True)
class Choice:
    """One set of guessed sizes: every guessed axis of a kind gets that kind's size."""

    batch: int
    image: int
    sequence: int


def _is_dynamic(d) -> bool:
    return not isinstance(d, int) or d <= 0


def _not_batch_name(d) -> bool:
    return isinstance(d, str) and any(w in d.lower() for w in _NOT_BATCH)


def batch_axis(spec: InputSpec) -> int | None:
    """The axis samples are stacked on: the one named batch, else the first dynamic axis not
    named like a sequence/size, else axis 0 of a fixed shape that starts with 1; None for scalars
    and fixed shapes that do not (the same array goes with every batch)."""
    shape = spec.shape
    if shape is None:
        return 0
    for axis, d in enumerate(shape):
        if isinstance(d, str) and "batch" in d.lower():
            return axis
    for axis, d in enumerate(shape):
        if _is_dynamic(d) and not _not_batch_name(d):
            return axis
    return 0 if shape and shape[0] == 1 else None


def image_axes(spec: InputSpec) -> tuple[int | None, tuple[int, ...]]:
    """(channel axis, spatial axes) of an NCHW/NHWC image input, else (None, ())."""
    shape = spec.shape
    if shape is None or len(shape) != 4 or batch_axis(spec) not in (0, None) or spec.dtype.kind != "f":
        return None, ()
    if shape[1] in (1, 3, 4):
        return 1, (2, 3)
    if shape[3] in (1, 3, 4):
        return 3, (1, 2)
    if _is_dynamic(shape[1]) and _is_dynamic(shape[2]) and _is_dynamic(shape[3]):
        return 1, (2, 3)
    return None, ()


def model_stride(model: onnx.ModelProto) -> tuple[int, int]:
    """Per spatial axis (height, width), the largest product of Conv/Pool strides along any path of
    the main graph (ConvTranspose and Resize divide it again): sizes that are multiples of it keep
    skip connections aligned and pool a recogniser's height down evenly."""
    stride: dict[str, tuple[int, int]] = {i.name: (1, 1) for i in model.graph.input}
    best = (1, 1)
    for node in model.graph.node:
        ins = [stride[i] for i in node.input if i in stride]
        if not ins:
            continue
        s = (max(h for h, _ in ins), max(w for _, w in ins))
        steps = next((list(a.ints) for a in node.attribute if a.name == "strides" and a.ints), [1])
        sh, sw = (max(int(steps[-2]), 1), max(int(steps[-1]), 1)) if len(steps) >= 2 else (max(int(steps[0]), 1),) * 2
        if node.op_type in _STRIDED:
            s = (s[0] * sh, s[1] * sw)
        elif node.op_type == "ConvTranspose":
            s = (max(1, s[0] // sh), max(1, s[1] // sw))
        elif node.op_type in ("Resize", "Upsample"):
            s = (max(1, s[0] // 2), max(1, s[1] // 2))
        for out in node.output:
            stride[out] = s
        best = (max(best[0], s[0]), max(best[1], s[1]))
    return min(best[0], MAX_STRIDE), min(best[1], MAX_STRIDE)


def _round_up(size: int, stride: int) -> int:
    return -(-size // stride) * stride


def parse_sizes(text: str) -> tuple[int, ...] | None:
    """'1x3x48x320', '[1, 3, 48, 320]', '3,48,320' -> a tuple of ints; None if not such a list or a
    size is past DIM_MAX (ASCII digits only: '²' or '٣' are no sizes)."""
    parts = re.findall(r"-?[0-9]+", text)
    rest = re.sub(r"-?[0-9]+|[\s,x×*\[\]()]", "", text)
    if not parts or rest or any(len(p) > 20 for p in parts):
        return None
    sizes = tuple(int(p) for p in parts)
    return sizes if all(abs(s) <= DIM_MAX for s in sizes) else None


def parse_size(text: str) -> int | None:
    """'128' -> 128: one size from 1 to DIM_MAX in ASCII digits; None otherwise."""
    text = text.strip()
    if not re.fullmatch(r"[0-9]{1,20}", text):
        return None
    size = int(text)
    return size if 0 < size <= DIM_MAX else None


class ShapePlan:
    """The shape of every generated input, for each `Choice` of guessed sizes (see module docstring)."""

    def __init__(self, specs: list[InputSpec], model: onnx.ModelProto | None = None, *,
                 dim_sizes: Mapping[str, int] | None = None, shapes: Mapping[str, tuple[int, ...]] | None = None,
                 batch: int = BATCH) -> None:
        self.specs = specs
        self.batch = int(batch)
        if self.batch < 1:
            raise OnnxportError(f"a batch of {batch} samples: give 1 or more")
        self.stride = model_stride(model) if model is not None else (1, 1)
        self._given = _checked_shapes(specs, shapes or {})
        self._dims = _checked_dims(specs, dim_sizes or {})
        meta = _metadata_shapes(model, specs) if model is not None else {}
        # per input, per axis: a size, or (kind, key): axes with one key share a size
        self._axes: dict[str, list[int | tuple[str, str]]] = {}
        kinds: dict[str, str] = {}
        for spec in specs:
            self._axes[spec.name] = self._plan(spec, meta.get(spec.name), kinds)

    def _plan(self, spec: InputSpec, meta: tuple[int | None, ...] | None, kinds: dict[str, str]):
        if spec.name in self._given:
            return list(self._given[spec.name])
        if spec.shape is None:
            return []
        b = batch_axis(spec)
        channel, spatial = image_axes(spec)
        axes: list[int | tuple[str, str]] = []
        for axis, d in enumerate(spec.shape):
            user = self._dims.get(d) if isinstance(d, str) else None
            user = user or self._dims.get(f"{spec.name}:{axis}")
            if not _is_dynamic(d):
                axes.append(int(d))
            elif user:
                axes.append(int(user))
            elif meta and meta[axis] and axis != b:  # the batch stays ours to choose
                axes.append(int(meta[axis]))
            else:
                kind = ("batch" if axis == b else "channels" if axis == channel else
                        "image" if axis in spatial else "sequence")
                key = d if isinstance(d, str) else f"{spec.name}:{axis}"
                axes.append((kinds.setdefault(key, kind), key))
        return axes

    @property
    def given(self) -> bool:
        """The user gave sizes (`shapes` or `dim_sizes`)."""
        return bool(self._given or self._dims)

    @property
    def known(self) -> bool:
        """Every input has a rank (else generating needs a file)."""
        return all(spec.name in self._given or spec.shape is not None for spec in self.specs)

    def guessed(self, name: str | None = None) -> list[str]:
        """Kinds guessed, for one input or all."""
        names = [name] if name else list(self._axes)
        return [a[0] for n in names for a in self._axes[n] if isinstance(a, tuple)]

    def choices(self) -> list[Choice]:
        kinds = set(self.guessed())
        images, seen = [], set()
        for base in [IMAGE] + (list(IMAGE_SIZES) if "image" in kinds else []):
            if self._image_sizes(base) not in seen:  # one base per rounded size
                seen.add(self._image_sizes(base))
                images.append(base)
        sequences = [SEQUENCE] + (list(SEQUENCE_SIZES) if "sequence" in kinds else [])
        pairs = [(images[0], s) for s in sequences] + [(i, sequences[0]) for i in images[1:]]
        batches = [self.batch] + ([1] if self.batch != 1 and "batch" in kinds else [])
        return [Choice(b, i, s) for b in batches for i, s in pairs][:MAX_CHOICES]

    def _image_sizes(self, base: int) -> tuple[int, int]:
        """(height, width) for a base image size: rounded up to the model's stride on each axis."""
        return _round_up(base, self.stride[0]), _round_up(base, self.stride[1])

    def shapes(self, choice: Choice | None = None) -> dict[str, tuple[int, ...]]:
        choice = choice or self.choices()[0]
        height, width = self._image_sizes(choice.image)
        sizes = {"batch": choice.batch, "sequence": choice.sequence, "channels": CHANNELS}
        out = {}
        for spec in self.specs:
            if not self._axes[spec.name] and spec.shape is None:
                raise OnnxportError(f"input '{spec.name}' has no declared shape; provide inputs from a file "
                                    f"(--inputs) or its shape (--shape {spec.name}=...)")
            _, spatial = image_axes(spec)
            out[spec.name] = tuple(a if isinstance(a, int) else
                                   (height if axis == spatial[0] else width) if a[0] == "image" else sizes[a[0]]
                                   for axis, a in enumerate(self._axes[spec.name]))
        return out

    def template(self, name: str, choice: Choice | None = None) -> str:
        """`--shape` text for `name`: sizes given or fixed, guessed ones as their guess but the
        batch, which stays a number: e.g. '2x3x?x?' for an image whose height and width were guessed."""
        shape = self.shapes(choice)[name]
        return "x".join(str(s) if not isinstance(a, tuple) or a[0] == "batch" else "?"
                        for a, s in zip(self._axes[name], shape))


def _checked_shapes(specs: list[InputSpec], shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    by_name = {s.name: s for s in specs}
    out = {}
    for name, shape in shapes.items():
        spec = by_name.get(name)
        if spec is None:
            raise OnnxportError(f"--shape {name}=...: the model has no input '{name}' "
                                f"(its inputs: {', '.join(by_name) or 'none'})")
        shape = tuple(int(s) for s in shape)
        if any(s <= 0 for s in shape):
            raise OnnxportError(f"--shape {name}: sizes must be positive, got {list(shape)}")
        if spec.shape is not None:
            if len(shape) != len(spec.shape):
                raise OnnxportError(f"--shape {name}: {len(shape)} sizes given, input {spec.describe()} "
                                    f"has rank {len(spec.shape)}")
            for axis, (d, s) in enumerate(zip(spec.shape, shape)):
                if not _is_dynamic(d) and d != s:
                    raise OnnxportError(f"--shape {name}: input {spec.describe()} has {d} on axis {axis}, not {s}")
        out[name] = shape
    return out


def _checked_dims(specs: list[InputSpec], dims: Mapping[str, int]) -> dict[str, int]:
    symbols = list(dict.fromkeys(d for s in specs for d in (s.shape or ()) if isinstance(d, str)))
    unnamed = {f"{s.name}:{a}" for s in specs for a, d in enumerate(s.shape or ()) if d is None}
    for name, size in dims.items():
        if int(size) <= 0:
            raise OnnxportError(f"--dim {name}={size}: a size must be positive")
        if name not in symbols and name not in unnamed:
            known = ", ".join(symbols + sorted(unnamed)) or "none"
            raise OnnxportError(f"--dim {name}: the model's inputs have no dimension '{name}' "
                                f"(dynamic ones: {known}; an unnamed one is INPUT:AXIS)")
    return {k: int(v) for k, v in dims.items()}


def _metadata_shapes(model: onnx.ModelProto, specs: list[InputSpec]) -> dict[str, tuple[int | None, ...]]:
    """Sizes for dynamic axes from the model's metadata, per input (None where it says nothing)."""
    props = {p.key: p.value for p in model.metadata_props}
    out = {}
    for spec in specs:
        if spec.shape is None or not spec.shape:
            continue
        keys = [k.format(spec.name) for k in _META_KEYS[:2]] + (list(_META_KEYS[2:]) if len(specs) == 1 else [])
        for key in keys:
            sizes = parse_sizes(props[key]) if key in props and len(props[key]) < 100 else None
            fitted = _fit(spec, sizes) if sizes else None
            if fitted:
                out[spec.name] = fitted
                break
    return out


def _fit(spec: InputSpec, sizes: tuple[int, ...]) -> tuple[int | None, ...] | None:
    """`sizes` laid on the axes of `spec`: all of them, all but the batch, or the two spatial ones."""
    rank, b = len(spec.shape), batch_axis(spec)
    _, spatial = image_axes(spec)
    if len(sizes) == rank:
        laid = list(sizes)
    elif len(sizes) == rank - 1 and b is not None:
        laid = list(sizes[:b]) + [None] + list(sizes[b:])
    elif len(sizes) == 2 and spatial:
        laid = [None] * rank
        laid[spatial[0]], laid[spatial[1]] = sizes
    else:
        return None
    for d, s in zip(spec.shape, laid):
        if s is not None and not _is_dynamic(d) and s > 0 and s != d:
            return None  # says something else than the declared type: not about this input
    return tuple(s if s is not None and s > 0 else None for s in laid)
