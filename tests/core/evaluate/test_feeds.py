"""Feeds: input specs (index ranges, masks, symbolic dims), generation, and lazy file sources."""

from __future__ import annotations

import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.evaluate.feeds import _npz_members, generate_feeds, input_specs, open_feeds
from onnxport.core.util.errors import OnnxportError

from ..model_builders import forward_mlp, make_model
from ..quant_models import encoder


def test_specs_of_an_encoder_know_index_ranges_and_masks():
    specs = {s.name: s for s in input_specs(encoder(vocab=50))}
    assert list(specs) == ["input_ids", "attention_mask"]
    assert specs["input_ids"].int_range == (0, 50)  # Gather over a 50-row embedding table
    assert specs["attention_mask"].mask and specs["attention_mask"].int_range is None
    assert specs["input_ids"].shape == ("batch", "sequence")


def test_index_range_found_through_cast_and_unsqueeze_and_from_a_parameter_input():
    nodes = [helper.make_node("Cast", ["ids"], ["ids64"], to=T.INT64),
             helper.make_node("Unsqueeze", ["ids64", "axes"], ["ids_u"]),
             helper.make_node("Gather", ["table", "ids_u"], ["emb"])]
    model = make_model(nodes, [helper.make_tensor_value_info("ids", T.INT32, ["n"]),
                               helper.make_tensor_value_info("table", T.FLOAT, [7, 4])],  # a parameter input
                       [helper.make_tensor_value_info("emb", T.FLOAT, None)],
                       [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    specs = {s.name: s for s in input_specs(model)}
    assert specs["ids"].int_range == (0, 7)
    feed = generate_feeds([specs["ids"]], 1)[0]
    assert feed["ids"].dtype == np.int32 and 0 <= feed["ids"].min() and feed["ids"].max() < 7


def test_generated_feeds_are_deterministic_and_sized_sensibly():
    specs = input_specs(encoder(vocab=50))
    a, b = generate_feeds(specs, 2, seed=3), generate_feeds(specs, 2, seed=3)
    assert all(np.array_equal(x[k], y[k]) for x, y in zip(a, b) for k in x)
    assert not np.array_equal(a[0]["input_ids"], a[1]["input_ids"])
    assert a[0]["input_ids"].shape == (2, 128) and a[0]["input_ids"].dtype == np.int64  # batch 2, sequence 128
    assert (a[0]["attention_mask"] == 1).all()
    big = generate_feeds(specs, 1, dim_sizes={"sequence": 40}, batch=3)[0]
    assert big["input_ids"].shape == (3, 40) == big["attention_mask"].shape  # same name -> same size


def test_unnamed_dynamic_dims_and_floats():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", T.FLOAT, [None, 3, "height"])],
                       [helper.make_tensor_value_info("y", T.FLOAT, None)])
    feed = generate_feeds(input_specs(model), 1)[0]
    assert feed["x"].shape == (2, 3, 128) and feed["x"].dtype == np.float32 and feed["x"].std() > 0.5


@pytest.fixture
def mlp_specs():
    return input_specs(forward_mlp())  # input: float32 [batch, 8]


def test_npz_stored_members_are_memory_mapped_and_batched(tmp_path, mlp_specs):
    x = np.arange(20 * 8, dtype=np.float32).reshape(20, 8)
    np.savez(tmp_path / "data.npz", input=x, unrelated=np.zeros(3))
    members = _npz_members(tmp_path / "data.npz")
    assert isinstance(members["input"].array(), np.memmap)  # not read into memory
    source = open_feeds(tmp_path / "data.npz", mlp_specs, batch_size=8)
    batches = list(source)
    assert len(source) == 3 and [b["input"].shape[0] for b in batches] == [8, 8, 4]
    np.testing.assert_array_equal(np.concatenate([b["input"] for b in batches]), x)
    assert list(source)[0]["input"].shape == (8, 8)  # re-iterable


def test_compressed_npz_and_casting(tmp_path, mlp_specs):
    x = np.random.default_rng(0).standard_normal((4, 8))  # float64 -> cast to the input's float32
    np.savez_compressed(tmp_path / "data.npz", input=x)
    with zipfile.ZipFile(tmp_path / "data.npz") as zf:
        assert zf.infolist()[0].compress_type == zipfile.ZIP_DEFLATED
    feed = open_feeds(tmp_path / "data.npz", mlp_specs).first()
    assert feed["input"].dtype == np.float32
    np.testing.assert_allclose(feed["input"], x.astype(np.float32))


def test_folder_of_npy_per_input_and_single_sample_without_batch_axis(tmp_path):
    specs = input_specs(encoder())
    folder = tmp_path / "calib"
    folder.mkdir()
    np.save(folder / "input_ids.npy", np.ones((10, 12), np.int32))  # int32 -> int64
    np.save(folder / "attention_mask.npy", np.ones((10, 12), np.int64))
    source = open_feeds(folder, specs, batch_size=4)
    feeds = list(source)
    assert len(feeds) == 3 and feeds[0]["input_ids"].dtype == np.int64 and feeds[-1]["input_ids"].shape == (2, 12)
    one = tmp_path / "one.npz"
    np.savez(one, input_ids=np.ones(12, np.int64), attention_mask=np.ones(12, np.int64))
    assert open_feeds(one, specs).first()["input_ids"].shape == (1, 12)


def test_folder_of_npz_files_and_of_npy_samples(tmp_path, mlp_specs):
    for i in range(3):
        np.savez(tmp_path / f"s{i}.npz", input=np.full((2, 8), i, np.float32))
    feeds = list(open_feeds(tmp_path, mlp_specs))
    assert [float(f["input"][0, 0]) for f in feeds] == [0.0, 1.0, 2.0]
    samples = tmp_path / "samples"
    samples.mkdir()
    for i in range(2):
        np.save(samples / f"sample_{i}.npy", np.full((1, 8), i, np.float32))
    assert len(list(open_feeds(samples, mlp_specs))) == 2


def test_mappings_and_lists_of_mappings(mlp_specs):
    x = np.zeros((3, 8), np.float32)
    assert open_feeds({"input": x}, mlp_specs).first()["input"].shape == (3, 8)
    assert len(list(open_feeds([{"input": x}, {"input": x}], mlp_specs))) == 2


@pytest.mark.parametrize("arrays, message", [
    ({"other": np.zeros((2, 8), np.float32)}, "no array for model input 'input' (it has: other)"),
    ({"input": np.zeros((2, 3, 8), np.float32)}, "has rank 2"),
    ({"input": np.zeros((2, 5), np.float32)}, "needs 8 on axis 1"),
    ({"input": np.zeros((2, 8), np.int64)}, "is int64, input input: float32"),
])
def test_bad_arrays_say_what_is_wrong(tmp_path, mlp_specs, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(OnnxportError, match="bad.npz") as info:
        open_feeds(tmp_path / "bad.npz", mlp_specs)
    assert message in str(info.value)


def test_inputs_disagreeing_on_sample_count(tmp_path):
    np.savez(tmp_path / "d.npz", input_ids=np.ones((3, 4), np.int64), attention_mask=np.ones((2, 4), np.int64))
    with pytest.raises(OnnxportError, match="disagree on the number of samples"):
        open_feeds(tmp_path / "d.npz", input_specs(encoder()))


def test_missing_and_unreadable_files(tmp_path, mlp_specs):
    with pytest.raises(OnnxportError, match="no such file"):
        open_feeds(tmp_path / "nope.npz", mlp_specs)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(OnnxportError, match="junk.npz"):
        open_feeds(tmp_path / "junk.npz", mlp_specs)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OnnxportError, match="no inputs found"):
        open_feeds(empty, mlp_specs)


def test_model_without_input_shapes_needs_a_file():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [onnx.helper.make_tensor_value_info("x", T.FLOAT, None)],
                       [helper.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(OnnxportError, match="no declared shape"):
        generate_feeds(input_specs(model), 1)
