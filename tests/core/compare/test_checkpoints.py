"""Two parameter files: the one parameter that moved is "changed", every other "same"; names only on
one side and other shapes are told apart; every supported format reads."""

from __future__ import annotations

import numpy as np
import pytest

from onnxport.core.compare.compare import compare
from onnxport.core.util.errors import OnnxportError
from tests.support.checkpoint_writer import write_checkpoint

from ..model_builders import mlp_weights


def _statuses(report) -> dict[str, str]:
    return {p.name: p.status for p in report.parameters}


def test_one_changed_parameter_of_two_ort_checkpoints(tmp_path):
    w = mlp_weights()
    a = write_checkpoint(tmp_path / "a.ckpt", w)
    moved = dict(w, **{"fc1.bias": w["fc1.bias"] + np.float32(0.25)})
    b = write_checkpoint(tmp_path / "b.ckpt", moved)
    report = compare(a, b)
    assert _statuses(report) == {"fc1.bias": "changed", "fc1.weight": "same", "fc2.weight": "same",
                                 "fc2.bias": "same"}
    first = report.parameters[0]
    assert first.name == "fc1.bias" and first.stats.max_abs == pytest.approx(0.25)
    assert report.differs
    d = report.to_dict()
    assert set(d) >= {"parameters"} and d["parameters"][0]["status"] == "changed"
    assert not compare(a, a).differs


def test_only_on_one_side_and_another_shape(tmp_path):
    w = mlp_weights()
    a = tmp_path / "a.npz"
    np.savez(a, **w)
    b_params = {k: v for k, v in w.items() if k != "fc2.bias"}
    b_params["fc1.weight"] = w["fc1.weight"][:8]
    b_params["extra"] = np.zeros(3, np.float32)
    b = tmp_path / "b.safetensors"
    from safetensors.numpy import save_file

    save_file(b_params, str(b))
    assert _statuses(compare(a, b)) == {"fc1.weight": "shape", "fc2.bias": "only_a", "extra": "only_b",
                                        "fc1.bias": "same", "fc2.weight": "same"}


def test_a_model_against_a_parameter_file_is_refused(tmp_path):
    from ..model_builders import forward_mlp

    model = tmp_path / "m.onnx"
    import onnx

    onnx.save(forward_mlp(), str(model))
    ckpt = write_checkpoint(tmp_path / "c.ckpt", mlp_weights())
    with pytest.raises(OnnxportError, match="cannot compare a parameter file"):
        compare(model, ckpt)
