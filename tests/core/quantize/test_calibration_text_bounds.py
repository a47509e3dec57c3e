"""Calibration text is read in bounded pieces: a line past TEXT_LINE_MAX characters is cut (its rest
skipped, never held), and reading stops at TEXT_READ_MAX characters (issue 36: a 1 GiB one-line
sparse file made the tokenizer abort at 3.3 GB)."""

from __future__ import annotations

import os

import numpy as np
from onnx import TensorProto as T

from onnxport.core.evaluate.feeds import InputSpec
from onnxport.core.quantize import calibration_sources
from onnxport.core.quantize.calibration_sources import _lines, text_feeds
from onnxport.core.util.budgets import TEXT_LINE_MAX, TEXT_READ_MAX, GiB

from .test_calibration_sources import _tokenizer


def test_a_long_line_is_cut_and_its_rest_skipped(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("a" * (3 * TEXT_LINE_MAX + 5) + "\nthe cat\n\n" + "b" * TEXT_LINE_MAX + "\nlast")
    assert _lines(path) == ["a" * TEXT_LINE_MAX, "the cat", "b" * TEXT_LINE_MAX, "last"]


def test_reading_stops_at_the_text_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration_sources, "TEXT_READ_MAX", 100)
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i:04d}\n" for i in range(1000)))  # 10 characters a line
    assert _lines(path) == [f"line {i:04d}" for i in range(10)]


def test_a_sparse_one_line_gigabyte_tokenizes_within_the_budget(tmp_path):
    path = tmp_path / "sparse.txt"
    with open(path, "wb") as f:
        f.truncate(GiB)  # 1 GiB of NUL characters on one line, no disk blocks
    assert os.stat(path).st_size == GiB
    lines = _lines(path)
    assert [len(line) for line in lines] == [TEXT_LINE_MAX] and TEXT_READ_MAX < GiB
    specs = [InputSpec("input_ids", T.INT64, ("batch", "seq"))]
    feeds = text_feeds(path, specs, _tokenizer(tmp_path / "tok") / "tokenizer.json")
    assert len(feeds) == 1 and feeds[0]["input_ids"].dtype == np.int64
