"""Task presets: the schema (no torch), and a tiny random BERT through every preset (torch).

Each export is run in ONNX Runtime on inputs of other batch/sequence sizes than the traced ones
(so the dynamic axes are real) and compared with PyTorch: max abs diff <= 1e-4.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from onnxport.core.pytorch.presets import PRESETS, TASKS, default_task, get_preset
from onnxport.core.util.errors import OnnxportError

EXPECTED_OUTPUTS = {
    "default": ["last_hidden_state"],
    "pooling": ["embeddings"],
    "question-answering": ["start_logits", "end_logits"],
    "text-classification": ["logits"],
    "zero-shot-classification": ["logits"],
}


def test_preset_schema():
    assert set(TASKS) == set(EXPECTED_OUTPUTS)
    for task, outputs in EXPECTED_OUTPUTS.items():
        preset = get_preset(task)
        assert list(preset.outputs) == outputs
        axes = preset.dynamic_axes(["input_ids", "attention_mask"])
        assert axes["input_ids"] == {0: "batch", 1: "sequence"} == axes["attention_mask"]
        for out in outputs:
            assert axes[out][0] == "batch"
    assert PRESETS["question-answering"].output_axes["start_logits"] == {0: "batch", 1: "sequence"}
    assert PRESETS["zero-shot-classification"].auto_class == PRESETS["text-classification"].auto_class
    assert get_preset(None).name == "default"


def test_unknown_task_names_the_choices():
    with pytest.raises(OnnxportError, match="question-answering"):
        get_preset("summarization")


def test_default_task_from_architectures():
    assert default_task(["BertForSequenceClassification"]) == "text-classification"
    assert default_task(["RobertaForQuestionAnswering"]) == "question-answering"
    assert default_task(["BertModel"]) == "default"
    assert default_task(None) == "default"


ARCHITECTURE = {"default": "BertModel", "pooling": "BertModel", "question-answering": "BertForQuestionAnswering",
                "text-classification": "BertForSequenceClassification",
                "zero-shot-classification": "BertForSequenceClassification"}


def _torch_reference(folder, task, feeds):
    """What PyTorch computes for the preset's outputs, from the model transformers loads."""
    import torch
    import transformers

    preset = get_preset(task)
    model = getattr(transformers, preset.auto_class).from_pretrained(str(folder), local_files_only=True)
    model.eval()
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
    if task == "default":
        return [out.last_hidden_state.numpy()]
    if task == "pooling":
        mask = torch.from_numpy(feeds["attention_mask"]).unsqueeze(-1).float()
        return [((out.last_hidden_state * mask).sum(1) / mask.sum(1)).numpy()]
    if task == "question-answering":
        return [out.start_logits.numpy(), out.end_logits.numpy()]
    return [out.logits.numpy()]


def _feeds(names, batch=3, seq=11, seed=5):
    rng = np.random.default_rng(seed)
    feeds = {"input_ids": rng.integers(0, 100, (batch, seq)), "attention_mask": np.ones((batch, seq), np.int64),
             "token_type_ids": np.zeros((batch, seq), np.int64)}
    feeds["attention_mask"][0, 7:] = 0
    feeds["token_type_ids"][:, 6:] = 1
    return {k: feeds[k].astype(np.int64) for k in names}


@pytest.mark.torch
@pytest.mark.parametrize("task", list(EXPECTED_OUTPUTS))
def test_tiny_bert_through_every_preset(tmp_path, task):
    pytest.importorskip("transformers")
    import onnxruntime as ort

    from onnxport.core.pytorch.export import export_torch
    from tests.core.torch_builders import tiny_bert

    labels = {"num_labels": 3} if "classification" in task else {}
    folder = tiny_bert(tmp_path / "bert", ARCHITECTURE[task], **labels)
    out = tmp_path / f"{task}.onnx"
    result = export_torch(folder, out, mode="inference", task=task)
    model = onnx.load(out)
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [o.name for o in model.graph.output] == EXPECTED_OUTPUTS[task] == result.outputs
    assert model.opset_import[0].version == 14 == result.opset
    for vi in model.graph.input:
        assert [d.dim_param for d in vi.type.tensor_type.shape.dim] == ["batch", "sequence"]
    for vi in model.graph.output:
        assert vi.type.tensor_type.shape.dim[0].dim_param == "batch"
    assert result.max_abs_diff is not None and result.max_abs_diff <= 1e-4
    names = {t.name for t in model.graph.initializer}
    assert not any(n.startswith("model.") for n in names)  # named as the model's state_dict

    feeds = _feeds(result.inputs)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feeds)
    expected = _torch_reference(folder, task, feeds)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        assert np.max(np.abs(g - e)) <= 1e-4


@pytest.mark.torch
def test_inputs_as_the_tokenizer_names_them(tmp_path):
    pytest.importorskip("transformers")
    from onnxport.core.pytorch.sources import describe_source
    from tests.core.torch_builders import tiny_bert, tiny_distilbert

    with_tok = describe_source(tiny_bert(tmp_path / "tok", tokenizer=True))
    assert [s.name for s in with_tok.inputs] == ["input_ids", "token_type_ids", "attention_mask"]
    assert not with_tok.notes
    distil = describe_source(tiny_distilbert(tmp_path / "distil"))
    assert [s.name for s in distil.inputs] == ["input_ids", "attention_mask"]  # no token_type_ids in its forward
    assert distil.task == "default" and distil.outputs == ["last_hidden_state"]


@pytest.mark.torch
def test_distilbert_pooling_and_dynamic_quantization(tmp_path):
    pytest.importorskip("transformers")
    import onnxruntime as ort

    from onnxport.core.workflow.torch_import import TorchImportOptions, run_import
    from tests.core.torch_builders import tiny_distilbert

    folder = tiny_distilbert(tmp_path / "distil")
    out = tmp_path / "emb.onnx"
    imported = run_import(TorchImportOptions(folder, out, task="pooling", quantize=True, opset=17))
    result = imported.export
    assert result.inputs == ["input_ids", "attention_mask"] and result.outputs == ["embeddings"]
    assert result.max_abs_diff <= 1e-4 and result.opset == 17
    quantized = imported.quantized.path
    assert quantized == tmp_path / "emb.int8.onnx" and imported.quantized.validation.passed
    q = onnx.load(quantized)
    assert any(n.op_type in ("MatMulInteger", "DynamicQuantizeLinear") for n in q.graph.node)
    feeds = _feeds(result.inputs)
    fp32 = ort.InferenceSession(str(out)).run(None, feeds)[0]
    int8 = ort.InferenceSession(str(quantized)).run(None, feeds)[0]
    cos = np.sum(fp32 * int8, 1) / (np.linalg.norm(fp32, axis=1) * np.linalg.norm(int8, axis=1))
    assert cos.min() > 0.98
