"""A fixed sample of ONNX's backend test models (corpus_run.SAMPLE, ~40 models) through inspect,
export of the graph outputs, export of a mid tensor, validate and quantize --mode dynamic: each
step ends in a correct result or a one-line refusal, never a crash, an invalid file or wrong
numbers (issue 26, item 11). `make corpus` runs all ~1,760 models the same way."""

from __future__ import annotations

import pytest

from .backend_corpus import BAD_OUTCOMES, backend_models, run_model
from .corpus import onnx_backend_data
from .corpus_run import SAMPLE


def _sample():
    try:
        root = onnx_backend_data()
    except pytest.skip.Exception:
        return [pytest.param(None, id="no-backend-data")]
    models = {m.name: m for m in backend_models(root)}
    return [pytest.param(models[name], id=name) for name in SAMPLE]


@pytest.mark.parametrize("model", _sample())
def test_backend_model_ends_right_or_in_one_line(model, tmp_path):
    if model is None:
        onnx_backend_data()  # skips with the reason, or fails where the data is required
    result = run_model(model, tmp_path)
    bad = {step: f"{outcome}: {result.notes.get(step, '')}" for step, outcome in result.steps.items()
           if outcome in BAD_OUTCOMES}
    assert not bad, bad
    assert result.steps["inspect"] == "ok"
