"""Sentence-transformers folders: `--task pooling` applies the Normalize module modules.json lists.

Reading modules.json (a stranger's file) needs no torch; the export of a tiny BERT folder with
and without a Normalize module is compared with PyTorch's pooled (and L2-normalised) states.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from onnxport.core.pytorch.st_modules import MAX_BYTES, NORMALIZE, sentence_steps

MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "name": "2", "path": "2_Normalize", "type": NORMALIZE}]


def test_modules_json_is_read_as_plain_data(tmp_path):
    assert sentence_steps(tmp_path).normalize is False and sentence_steps(tmp_path).problem is None
    (tmp_path / "modules.json").write_text(json.dumps(MODULES))
    steps = sentence_steps(tmp_path)
    assert steps.normalize and steps.unapplied == [] and steps.problem is None
    dense = [*MODULES[:2], {"type": "sentence_transformers.models.Dense"}, MODULES[2]]
    (tmp_path / "modules.json").write_text(json.dumps(dense))
    assert sentence_steps(tmp_path).unapplied == ["sentence_transformers.models.Dense"]


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b'{"type": "x"}', b'[{"type": 3}]',
                                     b" " * (MAX_BYTES + 1)])
def test_an_unusable_modules_json_is_a_note_not_a_crash(tmp_path, content):
    (tmp_path / "modules.json").write_bytes(content)
    steps = sentence_steps(tmp_path)
    assert steps.problem and not steps.normalize


def test_a_fifo_named_modules_json_is_not_opened(tmp_path):
    os.mkfifo(tmp_path / "modules.json")
    assert sentence_steps(tmp_path).problem  # returns at once: a FIFO would block open()


def test_the_pooling_mode_comes_from_its_config_inside_the_folder(tmp_path):
    folder = tmp_path / "st"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "modules.json").write_text(json.dumps(MODULES))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True,
                                                                 "pooling_mode_mean_tokens": False}))
    assert sentence_steps(folder).pooling == "cls"
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_max_tokens": True}))
    steps = sentence_steps(folder)
    assert steps.pooling is None and steps.unapplied == ["Pooling (max_tokens)"]
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"pooling_mode_cls_token": True}))
    for path in ("../outside.json", "/etc"):  # a stranger's path: never read outside the folder
        modules = [MODULES[0], {**MODULES[1], "path": path}, MODULES[2]]
        (folder / "modules.json").write_text(json.dumps(modules))
        steps = sentence_steps(folder)
        assert steps.pooling is None and steps.normalize and "Pooling mode" in steps.unapplied[0]
    (folder / "modules.json").unlink()
    (folder / "modules.json").symlink_to(outside)
    assert sentence_steps(folder).problem and not sentence_steps(folder).normalize


def _reference(folder, feeds, normalize: bool, cls: bool = False) -> np.ndarray:
    import torch
    import transformers

    model = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True).eval()
    with torch.no_grad():
        hidden = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).last_hidden_state
    mask = torch.from_numpy(feeds["attention_mask"]).unsqueeze(-1).float()
    pooled = hidden[:, 0] if cls else (hidden * mask).sum(1) / mask.sum(1)
    return (torch.nn.functional.normalize(pooled, dim=1) if normalize else pooled).numpy()


@pytest.mark.torch
@pytest.mark.parametrize("normalize", [True, False])
def test_pooling_export_applies_the_folders_normalize(tmp_path, normalize):
    pytest.importorskip("transformers")
    import onnxruntime as ort

    from onnxport.core.pytorch.export import export_torch
    from tests.core.torch_builders import tiny_bert

    folder = tiny_bert(tmp_path / "st")
    (folder / "modules.json").write_text(json.dumps(MODULES if normalize else MODULES[:2]))
    out = tmp_path / "pooled.onnx"
    result = export_torch(folder, out, mode="inference", task="pooling")
    assert any("L2-normalised" in n for n in result.notes) == normalize
    rng = np.random.default_rng(3)
    feeds = {"input_ids": rng.integers(0, 100, (3, 9)).astype(np.int64), "attention_mask": np.ones((3, 9), np.int64),
             "token_type_ids": np.zeros((3, 9), np.int64)}
    feeds["attention_mask"][1, 5:] = 0
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    norms = np.linalg.norm(got, axis=1)
    if normalize:
        assert np.allclose(norms, 1.0, atol=1e-5)
    else:
        assert np.all(np.abs(norms - 1.0) > 0.1)
    assert np.max(np.abs(got - _reference(folder, feeds, normalize))) <= 1e-4


@pytest.mark.torch
def test_pooling_export_takes_the_folders_pooling_mode_unless_told(tmp_path):
    pytest.importorskip("transformers")
    import onnxruntime as ort

    from onnxport.core.pytorch.export import export_torch
    from tests.core.torch_builders import tiny_bert

    folder = tiny_bert(tmp_path / "st")
    (folder / "modules.json").write_text(json.dumps(MODULES))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    rng = np.random.default_rng(4)
    feeds = {"input_ids": rng.integers(0, 100, (2, 7)).astype(np.int64), "attention_mask": np.ones((2, 7), np.int64),
             "token_type_ids": np.zeros((2, 7), np.int64)}
    for pooling, cls in ((None, True), ("mean", False)):
        out = tmp_path / f"{pooling}.onnx"
        result = export_torch(folder, out, mode="inference", task="pooling", pooling=pooling)
        assert any(("as asked" in n) == (pooling == "mean") and "Pooling" in n for n in result.notes)
        got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        assert np.max(np.abs(got - _reference(folder, feeds, True, cls))) <= 1e-4
