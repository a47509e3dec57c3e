"""int4 of the real all-MiniLM-L6-v2 (its first two layers, real weights), on real sentences: with
the default target the search writes a model mixing 4- and 8-bit weights that meets it, and what
it wrote is what it reported."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.quantize.quantize import QuantizeOptions, quantize

from .minilm_layers import minilm_with_sentences
from .test_minilm_quantize import SENTENCES


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    pytest.importorskip("torch")
    return minilm_with_sentences(tmp_path_factory.mktemp("minilm_int4"), SENTENCES)


def test_the_default_target_writes_what_the_search_reports(minilm, tmp_path):
    model, sentences = minilm
    result = quantize(model, tmp_path / "q.onnx", "int4", QuantizeOptions(validation_inputs=sentences))
    bits = result.search["bits"]
    assert "/embeddings/word_embeddings/Gather" in bits and len(bits) >= 13  # 12 MatMuls of 2 layers and more
    assert result.validation.passed and result.validation.min_cosine >= 0.99
    written = {n.name: next(a.i for a in n.attribute if a.name == "bits")
               for n in onnx.load(str(result.path)).graph.node if n.op_type in ("MatMulNBits", "GatherBlockQuantized")}
    assert written == {n: b for n, b in bits.items() if b}
    assert any(n.startswith("int4 search: ") for n in result.notes)
    assert result.size_ratio < 0.3
