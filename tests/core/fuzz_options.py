"""Generators for the option fuzz tests: what a user types (`--shape`, `--dim`, `--target`, bench's
`--batch`) and what a model declares (its inputs' sizes), at the edges that broke before: int64
products that wrap (2^32 x 2^32), sizes past int64, digits that pass `isdigit()` but not `int()`
('²'), other scripts' digits ('٣'), separators, names the model has not, totals past the budget.

`option_case()` draws one case: (model bytes, options dict for fuzz_worker's "options" target).
`budget_oracle(specs_sizes, count)` is the independent verdict the worker compares the gate with.
"""

from __future__ import annotations

from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper

GiB = 1 << 30
SIZES = st.one_of(st.integers(1, 64), st.sampled_from([
    0, 1, 2, 1 << 14, 1 << 16, 1 << 28, (1 << 28) + 1, 1 << 31, 1 << 32, 1 << 40, 1 << 62, (1 << 63) - 1,
    1 << 63, 1 << 64, 10 ** 30]))
SIZE_TEXT = st.one_of(SIZES.map(str), st.sampled_from(["²", "٣", "2^80", "1e3", "-1", "-0", " 4", "4 ", "", "0x10",
                                                          "four", "1_000", "+3", "１２"]))
SEPARATORS = st.sampled_from(["x", "×", ",", "*", " x ", "X", ";"])
ELEM_TYPES = [T.FLOAT, T.FLOAT16, T.DOUBLE, T.INT64, T.INT32, T.BOOL, T.UINT8]
DECLARED = st.one_of(SIZES, st.sampled_from(["batch", "seq", "n", None, "?", -1]))
TARGETS = st.one_of(st.sampled_from(["ort-mobile", "ort-1.14", "ort-1.17", "ort-1.22", "ort-9.9", "ort-1.", "ORT-1.17",
                                     "ort-1.17.3", "ort-01.017", "ort-1.14\n", "", "mobile", "ort-١.١٤"]),
                    st.text(max_size=8))


@st.composite
def declared_model(draw) -> tuple[bytes, list[str]]:
    """1-4 inputs of fuzzed declared shapes (fixed sizes up to 10^30, symbols, unnamed), each
    passed through Identity; (model bytes, input names)."""
    count = draw(st.integers(1, 4))
    ins, outs, nodes = [], [], []
    for i in range(count):
        shape = draw(st.lists(DECLARED, max_size=4))
        shape = [d if not isinstance(d, int) or d < (1 << 63) else (1 << 63) - 1 for d in shape]  # protobuf's int64
        elem = draw(st.sampled_from(ELEM_TYPES))
        ins.append(helper.make_tensor_value_info(f"x{i}", elem, shape))
        outs.append(helper.make_tensor_value_info(f"y{i}", elem, None))
        nodes.append(helper.make_node("Identity", [f"x{i}"], [f"y{i}"]))
    opset = draw(st.sampled_from([13, 17, 19, 21]))
    model = helper.make_model(helper.make_graph(nodes, "fuzz", ins, outs), opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString(), [f"x{i}" for i in range(count)]


@st.composite
def option_case(draw) -> tuple[bytes, dict]:
    data, names = draw(declared_model())
    name = st.one_of(st.sampled_from(names + ["batch", "seq", "n", "nope", ""]),
                     st.builds(lambda n, a: f"{n}:{a}", st.sampled_from(names), st.integers(0, 5)))
    shape = st.builds(lambda n, parts, sep: f"{n}={sep.join(parts)}", st.sampled_from(names + ["nope"]),
                      st.lists(SIZE_TEXT, min_size=1, max_size=4), SEPARATORS)
    dim = st.builds(lambda n, s: f"{n}={s}", name, st.one_of(SIZE_TEXT, st.just("dynamic")))
    options = {
        "shapes": draw(st.lists(shape, max_size=2)),
        "dims": draw(st.lists(dim, max_size=3)),
        "target": draw(TARGETS),
        "batch": draw(st.one_of(st.integers(1, 8), st.sampled_from([0, -1, -3, 1 << 31, 1 << 62]))),
        "count": draw(st.sampled_from([1, 2, 16])),
    }
    return data, options


def budget_oracle(sizes: list[tuple[list[int], int]], count: int, per_input: int, total: int) -> bool:
    """Whether inputs of `sizes` ((shape, item bytes) each) may be generated `count` times: exact
    integer arithmetic, written apart from the code under test."""
    each = []
    for shape, itemsize in sizes:
        n, nonzero = itemsize, itemsize
        for d in shape:
            n *= d
            nonzero *= d or 1
        if len(shape) > 64 or nonzero >= 1 << 63:  # numpy holds no such array, even with no bytes
            return False
        each.append(n)
    return all(n <= per_input for n in each) and sum(each) * max(count, 1) <= total

