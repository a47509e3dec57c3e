"""JSON from a stranger's file: nesting and size bounded before parsing (issue 36: config.json,
tokenizer files and modules.json nested 5,000-200,000 deep raised RecursionError)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnxport.core.util.budgets import JSON_DEPTH_MAX
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.json_files import check_json_file, json_depth, load_json, read_json

from ..fuzz_seeds import fuzz_settings

TRICKY = st.sampled_from(["a", "[", "]", "{", "}", '"', "\\", '\\"', '\\\\"', "\\\\", "[{", "]]}}"])
TEXT = st.lists(TRICKY, max_size=6).map("".join)
VALUES = st.recursive(st.none() | st.integers() | TEXT,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                      max_leaves=40)


def depth(value) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    return 1 + max(map(depth, value), default=0) if isinstance(value, list) else 0


@fuzz_settings(200, deadline_s=None)
@given(VALUES, st.booleans())
def test_depth_matches_the_parsed_nesting_whatever_the_strings_hold(value, spaced):
    data = json.dumps(value, indent=1 if spaced else None, ensure_ascii=False).encode()
    assert json_depth(data) == depth(value)


def test_deep_nesting_is_refused_before_parsing(tmp_path):
    for text in ("[" * 200_000 + "]" * 200_000, '{"a": ' * 5000 + "1" + "}" * 5000):
        with pytest.raises(OnnxportError, match=r"config.json: JSON nested \d+ levels deep \(at most 100\)"):
            load_json(text.encode(), "config.json")
    at_most = "[" * JSON_DEPTH_MAX + "]" * JSON_DEPTH_MAX
    assert depth(load_json(at_most.encode(), "x")) == JSON_DEPTH_MAX
    assert load_json(b'{"s": "[[[[[[\\"[["}', "x") == {"s": '[[[[[["[['}
    with pytest.raises(OnnxportError, match="x: not readable JSON"):
        load_json(b"\xff{", "x")


def test_files_are_regular_and_bounded(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"a": [1, 2]}')
    assert read_json(path, 100) == {"a": [1, 2]}
    with pytest.raises(OnnxportError, match="over the 10 bytes onnxport reads"):
        read_json(path, 10)
    path.write_text("{" * 1000)
    with pytest.raises(OnnxportError, match="nested 1000 levels deep"):
        check_json_file(path, 10_000)
    os.mkfifo(tmp_path / "pipe.json")
    with pytest.raises(OnnxportError, match="not a regular file"):  # returns at once: never blocks on a FIFO
        read_json(tmp_path / "pipe.json", 100)
    with pytest.raises(OnnxportError, match="no such file"):
        read_json(tmp_path / "missing.json", 100)
