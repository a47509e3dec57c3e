"""`--dim NAME=SIZE` and `--shape INPUT=1x3x48x320`: sizes for generated inputs, on every command
that runs a model (export --validate, validate, bench, quantize).

`--dim` sizes a named dimension everywhere it appears (`--dim sequence=128`), or one unnamed axis
(`--dim x:2=48`, INPUT:AXIS); `--shape` gives one input's whole shape, which is what unnamed dims
(`?`, `-1`) usually need. Both only apply where inputs are generated (not to --inputs files).
"""

from __future__ import annotations

import argparse

from onnxport.core.util.errors import OnnxportError


def add_input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                        help="size of a dynamic dimension of generated inputs (e.g. sequence=128; "
                             "an unnamed one as INPUT:AXIS=SIZE); repeatable")
    parser.add_argument("--shape", action="append", default=[], metavar="INPUT=AxBx...",
                        help="whole shape of a generated input (e.g. x=1x3x48x320); repeatable")


def whole_number(low: int, high: int, what: str):
    """argparse `type=` for a count typed by the user (`--batch`, `--threads`): ASCII digits from
    `low` to `high`; anything else is argparse's usage error (int() took '²' apart, 2^66 overflowed
    ONNX Runtime's C++ int)."""
    def parse(text: str) -> int:
        value = int(text.strip()) if text.strip().isascii() and text.strip().isdigit() else None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"a whole number from {low} to {high} expected, not '{text}'")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


def parse_dims(values: list[str]) -> dict[str, int]:
    from onnxport.core.evaluate.input_shapes import parse_size  # imports onnx: not at parser build

    sizes = {}
    for item in values:
        name, sep, text = item.rpartition("=")
        size = parse_size(text) if sep and name.strip() else None
        if size is None:
            raise OnnxportError("--dim expects NAME=SIZE with a positive size (a whole number up to 2^63-1, "
                                f"e.g. sequence=128), got '{item}'")
        sizes[name.strip()] = size
    return sizes


def parse_shapes(values: list[str]) -> dict[str, tuple[int, ...]]:
    from onnxport.core.evaluate.input_shapes import parse_sizes  # imports onnx: not at parser build

    shapes = {}
    for item in values:
        name, sep, text = item.rpartition("=")
        sizes = parse_sizes(text) if sep and name.strip() else None
        if sizes is None or any(s <= 0 for s in sizes):
            raise OnnxportError("--shape expects INPUT=SIZExSIZE... with positive sizes (whole numbers up to 2^63-1, "
                                f"e.g. x=1x3x48x320), got '{item}'")
        shapes[name.strip()] = sizes
    return shapes


def input_sizes(args: argparse.Namespace) -> dict:
    """`dim_sizes=` and `shapes=` keyword arguments for validate/benchmark/quantize/post_export."""
    return {"dim_sizes": parse_dims(getattr(args, "dim", []) or []),
            "shapes": parse_shapes(getattr(args, "shape", []) or [])}
