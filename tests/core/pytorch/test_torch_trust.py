"""Trust: a PyTorch program runs only when trusted; nothing is ever unpickled outside weights_only.

Every hostile source here leaves a marker file if its code runs; the tests assert it never appears
(and, for the programs, that it does appear once trusted: the marker really works).
"""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from onnxport.core.cli import main as cli_main
from onnxport.core.pytorch.trust import UntrustedProgramError
from onnxport.core.util.errors import OnnxportError

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
builders = pytest.importorskip("tests.core.torch_builders")
hostile = pytest.importorskip("tests.core.trust_builders")

X = "x:float32:batch,4"


@pytest.fixture(scope="module")
def pt2(tmp_path_factory):
    """An honest .pt2 (Linear-LayerNorm-GELU-Dropout-Linear, dynamic batch)."""
    return builders.save_pt2(builders.ln_net(), (torch.randn(3, 8),), tmp_path_factory.mktemp("pt2") / "ln.pt2")


# ---- programs need trust ----------------------------------------------------------------------

def test_an_untrusted_torchscript_is_never_loaded(tmp_path):
    from onnxport.core.pytorch.export import export_torch
    from onnxport.core.pytorch.sources import describe_source, load_program

    marker = tmp_path / "ran"
    source = hostile.load_marker_torchscript(tmp_path / "net.pt", marker)
    for call in (lambda: describe_source(source), lambda: load_program(source),
                 lambda: export_torch(source, tmp_path / "x.onnx", inputs=None)):
        with pytest.raises(UntrustedProgramError, match="executes its author's code"):
            call()
    assert not marker.exists() and not (tmp_path / "x.onnx").exists()
    info = describe_source(source, trust_code=True)  # the user trusts it: torch.jit.load runs __setstate__
    assert marker.exists() and [p.name for p in info.parameters] == ["weight"]


def test_an_untrusted_pt2_is_refused_and_a_trusted_one_loads(pt2):
    from onnxport.core.pytorch.sources import describe_source

    with pytest.raises(UntrustedProgramError, match="torch.export .pt2 file is a program"):
        describe_source(pt2)
    info = describe_source(pt2, trust_code=True)
    assert [s.name for s in info.inputs] == ["input"] and info.inputs[0].shape == ("batch", 8)


def test_cli_needs_trust_model_code_for_a_program(tmp_path, capsys):
    marker = tmp_path / "ran"
    source = hostile.forward_marker_torchscript(tmp_path / "net.pt", marker)
    out = tmp_path / "net.onnx"
    args = ["torch-export", str(source), "-o", str(out), "--mode", "inference", "--input", X, "-q"]
    assert cli_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "executes its author's code" in err and "--trust-model-code" in err
    assert not marker.exists() and not out.exists()
    assert cli_main(args + ["--trust-model-code"]) == 0  # trusted: it runs (the forward creates the file)
    assert marker.exists() and out.exists()


# ---- .pt2: no pickle anywhere, trusted or not -----------------------------------------------------

def _constant(path_name: str, use_pickle: bool = True) -> dict:
    return {"path_name": path_name, "is_param": False, "use_pickle": use_pickle, "tensor_meta": None}


def _crafted(pt2, tmp_path, marker, variant: str):
    """A copy of `pt2` that makes torch unpickle `marker`'s pickle in one of the ways torch can."""
    evil, evil0 = hostile.marker_pickle(marker), hostile.marker_pickle(marker, protocol=0)
    config = hostile.add_config_entry
    buf = io.BytesIO()
    torch.save({"x": hostile.Marker(marker)}, buf)
    saved = buf.getvalue()  # a torch.save zip holding the object
    variants = {
        # torch: pickle.loads, chosen by the config's path_name prefix, the payload in a sub-folder
        "opaque in a sub-folder": (config("constants", "c", _constant("opaque_obj_x/payload")),
                                   {"data/constants/opaque_obj_x/payload": evil}),
        "opaque, protocol 0": (config("constants", "c", _constant("opaque_obj_0")),
                               {"data/constants/opaque_obj_0": evil0}),
        "custom object": (config("constants", "c", _constant("custom_obj_0")),
                          {"data/constants/custom_obj_0": saved}),
        # torch: torch.load(weights_only=False)
        "pickled tensor constant": (config("constants", "c", _constant("tensor_9")), {"data/constants/tensor_9": saved}),
        "pickled weight": (config("weights", "w", dict(_constant("weight_99"), is_param=True)),
                           {"data/weights/weight_99": saved}),
        # members no config names: a pickle stream, an opaque folder, a legacy weights file
        "stray pickle": (None, {"extra/notes": evil}),
        "opaque folder": (None, {"data/stuff/opaque_obj_1/x": b"{}"}),
        "legacy weights": (None, {"data/weights/model.pt": evil0}),
        # torch: deserialize_torch_artifact retries a failed weights-only load without it
        "sample inputs": (lambda name, data: saved if name == "data/sample_inputs/model.pt" else data, None),
        # a raw tensor payload replaced by a pickle
        "raw payload": (lambda name, data: evil if name == "data/weights/weight_0" else data, None),
        # the pre-2.7 layout, read through deserialize_torch_artifact
        "old layout": (None, {"version": b"8.13", "serialized_state_dict.pt": saved}),
    }
    edit, extra = variants[variant]
    return hostile.rewrite_pt2(pt2, tmp_path / "evil.pt2", edit, extra)


@pytest.mark.parametrize("variant", ["opaque in a sub-folder", "opaque, protocol 0", "custom object",
                                     "pickled tensor constant", "pickled weight", "stray pickle", "opaque folder",
                                     "legacy weights", "sample inputs", "raw payload", "old layout"])
def test_a_pt2_holding_a_pickle_anywhere_is_refused_before_torch_sees_it(pt2, tmp_path, variant):
    from onnxport.core.pytorch.export import export_torch

    marker = tmp_path / "ran"
    source = _crafted(pt2, tmp_path, marker, variant)
    out = tmp_path / "x.onnx"
    with pytest.raises(OnnxportError, match="pickled Python objects|not plain tensors|pre-2.7") as caught:
        export_torch(source, out, trust_code=True)
    assert "\n" not in caught.value.one_line()
    assert not marker.exists() and not out.exists()


def test_cli_refuses_a_pickle_in_a_trusted_pt2_in_one_line(pt2, tmp_path, capsys):
    marker = tmp_path / "ran"
    source = _crafted(pt2, tmp_path, marker, "opaque in a sub-folder")
    out = tmp_path / "x.onnx"
    assert cli_main(["torch-export", str(source), "-o", str(out), "--mode", "inference",
                     "--trust-model-code", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "opaque_obj_x/payload" in err
    assert not marker.exists() and not out.exists()


def test_raw_weights_that_start_like_a_pickle_are_not_refused(tmp_path):
    from onnxport.core.pytorch.pt2_check import check_pt2_archive
    from onnxport.core.pytorch.sources import describe_source

    model = builders.ln_net()
    first = struct.unpack("<f", b"\x80\x02\x00\x3f")[0]  # a plausible weight whose bytes open like a pickle
    with torch.no_grad():
        model[0].weight[0, 0] = first
    source = builders.save_pt2(model, (torch.randn(3, 8),), tmp_path / "ln.pt2")
    with zipfile.ZipFile(source) as zf:
        heads = [zf.read(n)[:2] for n in zf.namelist() if "/data/weights/weight_" in n]
    assert b"\x80\x02" in heads
    check_pt2_archive(source, torch)
    assert describe_source(source, trust_code=True).parameters[0].name == "0.weight"


# ---- Hugging Face .bin: weights-only, one line ------------------------------------------------------

def _bin_folder(folder, marker=None):
    pytest.importorskip("transformers")
    from safetensors.torch import load_file

    builders.tiny_bert(folder)
    state = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    if marker is not None:
        state["x"] = hostile.Marker(marker)
    torch.save(state, folder / "pytorch_model.bin")
    return folder


def test_hf_bin_with_a_pickled_object_is_refused_in_one_line(tmp_path, capsys):
    marker = tmp_path / "ran"
    folder = _bin_folder(tmp_path / "bert", marker)
    out = tmp_path / "x.onnx"
    capsys.readouterr()  # save_pretrained's progress bar
    assert cli_main(["torch-export", str(folder), "-o", str(out), "--mode", "inference", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "pytorch_model.bin" in err and "safetensors" in err
    assert not marker.exists() and not out.exists()


def test_hf_bin_of_plain_tensors_loads_without_trust(tmp_path):
    from onnxport.core.pytorch.sources import load_program

    program = load_program(_bin_folder(tmp_path / "bert"))
    assert any(name.endswith("word_embeddings.weight") for name, _ in program.module.named_parameters())
