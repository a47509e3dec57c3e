"""Calibration data given as unnamed arrays or as lines of text (quantize/calibration_sources.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T

from onnxport.core.evaluate.feeds import InputSpec, open_feeds
from onnxport.core.quantize.calibration_sources import calibration_data, text_feeds
from onnxport.core.util.errors import OnnxportError

IMAGE = InputSpec("image", T.FLOAT, ("n", 3, 4, 4))
MASK = InputSpec("mask", T.FLOAT, ("n", 4))
TEXT = [InputSpec("input_ids", T.INT64, ("batch", "seq")), InputSpec("attention_mask", T.INT64, ("batch", "seq")),
        InputSpec("token_type_ids", T.INT64, ("batch", "seq"))]


def _tokenizer(folder):
    """A small word-level Hugging Face tokenizer (tokenizers' own format), with [PAD] = 0."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "the", "cat", "sat", "on", "mat", "a", "dog"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    folder.mkdir(exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text('{"pad_token": "[PAD]", "model_max_length": 6}')
    return folder


def test_positional_npz_maps_arrays_to_inputs_in_order(tmp_path):
    rng = np.random.default_rng(0)
    image, mask = rng.standard_normal((5, 3, 4, 4)).astype(np.float32), np.ones((5, 4), np.float32)
    np.savez(tmp_path / "cal.npz", image, mask)
    data = calibration_data(tmp_path / "cal.npz", [IMAGE, MASK])
    feeds = list(open_feeds(data, [IMAGE, MASK]))
    assert len(feeds) == 1
    np.testing.assert_array_equal(feeds[0]["image"], image)
    np.testing.assert_array_equal(feeds[0]["mask"], mask)


def test_folder_of_positional_npz_one_sample_each(tmp_path):
    folder = tmp_path / "cal"
    folder.mkdir()
    for i in range(3):
        np.savez(folder / f"s{i}.npz", np.full((3, 4, 4), i, np.float32))  # one sample, no batch axis
    feeds = list(open_feeds(calibration_data(folder, [IMAGE]), [IMAGE]))
    assert [f["image"].shape for f in feeds] == [(1, 3, 4, 4)] * 3
    assert [float(f["image"].mean()) for f in feeds] == [0.0, 1.0, 2.0]


def test_named_npz_is_left_to_open_feeds(tmp_path):
    np.savez(tmp_path / "cal.npz", image=np.zeros((2, 3, 4, 4), np.float32))
    assert calibration_data(tmp_path / "cal.npz", [IMAGE]) == tmp_path / "cal.npz"


def test_positional_npz_with_the_wrong_count_says_so(tmp_path):
    np.savez(tmp_path / "cal.npz", np.zeros((2, 3, 4, 4), np.float32))
    with pytest.raises(OnnxportError, match=r"1 unnamed array\(s\) \(arr_0...\) for 2 model input\(s\) \(image, mask\)"):
        calibration_data(tmp_path / "cal.npz", [IMAGE, MASK])


def test_text_lines_through_the_tokenizer_beside_the_model(tmp_path):
    _tokenizer(tmp_path)
    (tmp_path / "lines.txt").write_text("the cat sat\n\nthe dog sat on a mat mat mat\n" + "a cat\n" * 9)
    feeds = calibration_data(tmp_path / "lines.txt", TEXT, model_path=tmp_path / "model.onnx")
    assert len(feeds) == 2  # 11 non-empty lines, 8 per batch
    first = feeds[0]
    assert first["input_ids"].dtype == np.int64 and first["input_ids"].shape == (8, 6)  # truncated to 6
    assert first["input_ids"][0].tolist() == [2, 3, 4, 0, 0, 0]  # padded with [PAD]
    assert first["attention_mask"][0].tolist() == [1, 1, 1, 0, 0, 0]
    assert first["input_ids"][1].tolist() == [2, 8, 4, 5, 7, 6]
    assert feeds[1]["input_ids"].shape == (3, 2)  # padded to the longest line of its batch


def test_text_with_a_fixed_sequence_length_pads_to_it(tmp_path):
    specs = [InputSpec("input_ids", T.INT64, ("batch", 4))]
    (tmp_path / "lines.txt").write_text("the cat\n")
    feeds = text_feeds(tmp_path / "lines.txt", specs, _tokenizer(tmp_path / "tok") / "tokenizer.json")
    assert feeds[0]["input_ids"].tolist() == [[2, 3, 0, 0]]


def test_text_without_a_tokenizer_names_the_option(tmp_path):
    (tmp_path / "lines.txt").write_text("the cat\n")
    with pytest.raises(OnnxportError, match="no tokenizer") as err:
        calibration_data(tmp_path / "lines.txt", TEXT, model_path=tmp_path / "m" / "model.onnx")
    assert "--tokenizer FOLDER" in err.value.one_line()
    with pytest.raises(OnnxportError, match="no tokenizer.json there"):
        calibration_data(tmp_path / "lines.txt", TEXT, tokenizer=tmp_path)


def test_text_for_a_model_with_other_inputs_is_refused(tmp_path):
    _tokenizer(tmp_path)
    (tmp_path / "lines.txt").write_text("the cat\n")
    with pytest.raises(OnnxportError, match="also takes 'pixel_values'"):
        calibration_data(tmp_path / "lines.txt", TEXT + [InputSpec("pixel_values", T.FLOAT, ("n", 3))],
                         tokenizer=tmp_path)
