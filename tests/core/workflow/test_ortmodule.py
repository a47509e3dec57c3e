"""ORTModule-trained models (seed 004): the graphs ORTModule saved + a state_dict -> inference model.

Names only (file-name parsing, grouping, picking, name alignment) need no torch; the end-to-end
tests build the graphs as ORTModule's exporter does (tests/core/ortmodule_builders.py) and compare
ONNX Runtime's output with the PyTorch module in eval mode.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.cli import main
from onnxport.core.io.parameter_set import ParameterSet, ParamTensor
from onnxport.core.params.name_alignment import align_if_better
from onnxport.core.util.errors import OnnxportError
from onnxport.core.workflow.ortmodule import (
    align_parameter_names,
    embed_state_dict,
    find_ortmodule_sets,
    parse_file_name,
    pick_graph,
)
from onnxport.core.workflow.sources import classify_sources, open_sources

from ..ortmodule_builders import OUTPUT, bn_net, mlp, ortmodule_folder, run_both, save_state_dict, write_decoy

TOLERANCE = 1e-5


def touch(folder: Path, *names: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / n for n in names]
    for p in paths:
        p.write_bytes(b"")
    return paths


def param_set(shapes: dict[str, tuple[int, ...]], kind: str = "state_dict") -> ParameterSet:
    params = {}
    for name, shape in shapes.items():
        array = np.zeros(shape, np.float32)
        params[name] = ParamTensor(name, T.FLOAT, shape, loader=lambda a=array: a)
    return ParameterSet(params=params, kind=kind)


def graph_with_parameters(names: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    """x -> Add(p) for each parameter input: a graph whose parameters are inputs, as ORTModule exports them."""
    nodes, current = [], "x"
    for i, name in enumerate(names):
        nodes.append(helper.make_node("Add", [current, name], [f"h{i}"]))
        current = f"h{i}"
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [4])]
    inputs += [helper.make_tensor_value_info(n, T.FLOAT, list(s)) for n, s in names.items()]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(current, T.FLOAT, [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# ---- file names, grouping, picking -----------------------------------------------------------

@pytest.mark.parametrize("name, parsed", [
    ("net_torch_exported_inference.onnx", ("net", "torch_exported", "inference")),
    ("my_bert_v2_optimized_pre_grad_training.onnx", ("my_bert_v2", "optimized_pre_grad", "training")),
    ("m_optimized_training.onnx", ("m", "optimized", "training")),
    ("m_execution_model_inference.onnx", ("m", "execution_model", "inference")),
    ("m_post_processed_training.onnx", ("m", "post_processed", "training")),
    ("eval_model.onnx", None),
    ("m_torch_exported_eval.onnx", None),
    ("m_torch_exported_inference.onnx.data", None),
])
def test_parse_file_name(name, parsed):
    assert parse_file_name(name) == parsed


def test_sets_are_grouped_by_prefix_and_a_prefix_chooses(tmp_path):
    folder = tmp_path / "saved"
    touch(folder, "a_torch_exported_inference.onnx", "a_execution_model_inference.onnx", "a_optimized_training.onnx",
          "b_net_torch_exported_training.onnx", "b_net_optimized_training.onnx", "notes.txt", "eval_model.onnx")
    sets = {s.prefix: s for s in find_ortmodule_sets([folder])}
    assert sorted(sets) == ["a", "b_net"]
    assert sorted(sets["a"].files) == [("execution_model", "inference"), ("optimized", "training"),
                                       ("torch_exported", "inference")]
    assert pick_graph(folder, "a").name == "a_torch_exported_inference.onnx"
    assert pick_graph(folder, "b_net").name == "b_net_torch_exported_training.onnx"
    with pytest.raises(OnnxportError, match="several models; choose a prefix: 'a', 'b_net'"):
        pick_graph(folder)
    with pytest.raises(OnnxportError, match="with prefix 'c'"):
        pick_graph(folder, "c")
    with pytest.raises(OnnxportError, match="no ORTModule graphs"):
        pick_graph(touch(tmp_path / "empty", "readme.md")[0].parent)
    with pytest.raises(OnnxportError, match="no such file or folder"):
        pick_graph(tmp_path / "missing")
    assert pick_graph(folder / "a_execution_model_inference.onnx").name == "a_execution_model_inference.onnx"


def test_the_torch_exported_inference_graph_is_picked_over_later_stages(tmp_path):
    every = [f"p_{stage}_{mode}.onnx" for stage in ("execution_model", "optimized", "optimized_pre_grad",
                                                   "post_processed", "torch_exported")
             for mode in ("inference", "training")]
    assert pick_graph(touch(tmp_path / "all", *every)[0].parent).name == "p_torch_exported_inference.onnx"
    training_only = touch(tmp_path / "train", "p_torch_exported_training.onnx", "p_optimized_training.onnx",
                          "p_execution_model_training.onnx")
    assert pick_graph(training_only[0].parent).name == "p_torch_exported_training.onnx"
    grads = touch(tmp_path / "grads", "p_optimized_training.onnx", "p_execution_model_training.onnx")
    with pytest.raises(OnnxportError, match="only graphs with a gradient graph"):
        pick_graph(grads[0].parent)


def test_open_path_picks_the_same_graph_and_keeps_the_set_out_of_unused(tmp_path):
    folder = tmp_path / "saved"
    folder.mkdir()
    for name in ("net_execution_model_inference", "net_optimized_training", "net_torch_exported_inference",
                 "net_torch_exported_training"):
        write_decoy(folder / f"{name}.onnx")
    found = classify_sources([folder])
    model, params, others = found.model, found.params, found.others
    assert model.name == "net_torch_exported_inference.onnx"  # by sorted name: execution_model (wrong)
    assert params == [] and others == []
    files = sorted(folder.iterdir(), reverse=True)  # dropped as files, any order
    assert classify_sources(files).model.name == "net_torch_exported_inference.onnx"
    assert classify_sources([folder / "net_optimized_training.onnx"]).model.name == "net_optimized_training.onnx"  # chosen
    write_decoy(folder / "other_torch_exported_inference.onnx")
    with pytest.raises(OnnxportError, match="several models.*'net', 'other'"):
        classify_sources([folder])


# ---- name alignment --------------------------------------------------------------------------

WRAPPED = {"_original_module.fc1.weight": (4,), "_original_module.fc1.bias": (4,),
           "_original_module.bn.running_mean": (4,)}
PLAIN = {"fc1.weight": (4,), "fc1.bias": (4,), "bn.running_mean": (4,)}


@pytest.mark.parametrize("graph, file_prefix, added, removed", [
    (WRAPPED, "", "_original_module.", ""),  # ORTModule graph, plain state_dict
    (WRAPPED, "module.", "_original_module.", "module."),  # ... saved from DDP
    (WRAPPED, "_orig_mod.", "_original_module.", "_orig_mod."),  # ... saved from torch.compile
    (WRAPPED, "module._orig_mod.", "_original_module.", "module._orig_mod."),
    (PLAIN, "module.", "", "module."),  # plain export, DDP state_dict
    (PLAIN, "_orig_mod.", "", "_orig_mod."),
])
def test_align_parameter_names(graph, file_prefix, added, removed):
    model = graph_with_parameters(graph)
    params = param_set({file_prefix + n: s for n, s in PLAIN.items()} | {file_prefix + "bn.num_batches_tracked": ()})
    aligned, alignment = align_parameter_names(model, params)
    assert (alignment.added_prefix, alignment.removed_prefix) == (added, removed)
    assert sorted(alignment.match.matched) == sorted(graph) and alignment.match.ok
    assert alignment.unused == [file_prefix + "bn.num_batches_tracked"]  # as named in the file
    assert alignment.renamed == 4 and alignment.changed
    assert set(graph) <= set(aligned) and aligned[next(iter(graph))].name == next(iter(graph))
    assert alignment.how() and "3 matched" in alignment.summary()
    assert align_if_better(model, params)[1] is not None


def test_alignment_leaves_fitting_names_and_ort_checkpoints_alone():
    model = graph_with_parameters(WRAPPED)
    fitting = param_set(dict(WRAPPED))
    same, alignment = align_parameter_names(model, fitting)
    assert same is fitting and not alignment.changed and alignment.match.ok
    assert align_if_better(model, fitting) == (fitting, None)
    ort = param_set(dict(PLAIN), kind="ort-checkpoint")  # named from the graph: never renamed
    assert align_if_better(model, ort) == (ort, None)


def test_unmatched_names_are_reported_not_guessed():
    model = graph_with_parameters(WRAPPED)
    params = param_set({"fc1.weight": (4,), "fc1.bias": (4,), "head.weight": (4,)})  # bn missing, head extra
    _, alignment = align_parameter_names(model, params)
    assert alignment.added_prefix == "_original_module."
    assert alignment.match.missing == ["_original_module.bn.running_mean"]
    assert alignment.unused == ["head.weight"] and not alignment.match.ok
    # a swap that makes two names collide is never chosen
    clash = param_set({"module.fc1.weight": (4,), "fc1.weight": (4,)})
    _, alignment = align_parameter_names(graph_with_parameters(PLAIN), clash)
    assert not alignment.changed and alignment.match.matched == ["fc1.weight"]


# ---- end to end (torch) ----------------------------------------------------------------------

BUILDERS = {"mlp": mlp, "bn": bn_net}


@pytest.fixture(params=sorted(BUILDERS))
def trained(request, tmp_path):
    """(module, ORTModule folder) for an MLP and a BatchNorm+Dropout model."""
    pytest.importorskip("torch")
    module = BUILDERS[request.param]()
    return module, ortmodule_folder(module, tmp_path / f"{request.param}_onnx")


@pytest.mark.torch
@pytest.mark.parametrize("form", ["pt", "safetensors"])
def test_embed_state_dict_runs_like_pytorch(trained, tmp_path, form):
    module, folder = trained
    if form == "pt":
        state = save_state_dict(module, tmp_path / "state.pt")
    else:
        safetensors_torch = pytest.importorskip("safetensors.torch")
        state = tmp_path / "model.safetensors"
        safetensors_torch.save_file(module.state_dict(), str(state))
    result = embed_state_dict(folder, state, tmp_path / "out.onnx")
    assert result.graph.name == "net_torch_exported_inference.onnx"
    assert result.alignment.added_prefix == "_original_module." and result.alignment.match.ok
    expected_unused = ["bn.num_batches_tracked"] if "bn.weight" in module.state_dict() else []
    assert result.alignment.unused == expected_unused
    assert result.export.outputs == [OUTPUT]
    assert run_both(module, result.export.path) <= TOLERANCE
    ops = {n.op_type for n in onnx.load(str(result.export.path)).graph.node}
    assert "Dropout" not in ops


@pytest.mark.torch
@pytest.mark.parametrize("key_prefix", ["module.", "_orig_mod."])
def test_embed_from_ddp_and_compiled_state_dicts_of_a_training_mode_graph(tmp_path, key_prefix):
    pytest.importorskip("torch")
    module = bn_net(seed=3)
    folder = ortmodule_folder(module, tmp_path / "onnx", modes=("training",))  # only the training export
    state = save_state_dict(module, tmp_path / "state.pt", key_prefix)
    result = embed_state_dict(folder, state, tmp_path / "out.onnx")
    assert result.graph.name == "net_torch_exported_training.onnx"
    assert result.alignment.removed_prefix == key_prefix
    assert result.alignment.unused == [key_prefix + "bn.num_batches_tracked"]
    assert run_both(module, result.export.path) <= TOLERANCE  # BatchNorm/Dropout in inference form


@pytest.mark.torch
def test_compiled_module_state_dict_keys(tmp_path):
    torch = pytest.importorskip("torch")
    module = mlp()
    compiled = torch.compile(module)  # not run: only its state_dict's names matter
    assert next(iter(compiled.state_dict())).startswith("_orig_mod.")
    torch.save(compiled.state_dict(), tmp_path / "state.pt")
    folder = ortmodule_folder(module, tmp_path / "onnx", modes=("inference",), decoys=())
    result = embed_state_dict(folder, tmp_path / "state.pt", tmp_path / "out.onnx")
    assert run_both(module, result.export.path) <= TOLERANCE


@pytest.mark.torch
def test_a_missing_parameter_is_a_clear_error_and_nothing_is_written(tmp_path):
    torch = pytest.importorskip("torch")
    module = mlp()
    folder = ortmodule_folder(module, tmp_path / "onnx", decoys=())
    state = {k: v for k, v in module.state_dict().items() if k != "fc2.bias"}
    torch.save(state, tmp_path / "state.pt")
    out = tmp_path / "out.onnx"
    with pytest.raises(OnnxportError, match="'_original_module.fc2.bias' is missing"):
        embed_state_dict(folder, tmp_path / "state.pt", out)
    assert not out.exists()
    torch.save({"encoder.weight": torch.zeros(3)}, tmp_path / "unrelated.pt")
    with pytest.raises(OnnxportError, match="fits nothing in the model: 0 of 1 parameters matched, 1 unexpected"):
        embed_state_dict(folder, tmp_path / "unrelated.pt", out)


# ---- CLI -------------------------------------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxport.core.cli", *map(str, args)], capture_output=True,
                          text=True)


@pytest.fixture
def bn_folder(tmp_path):
    pytest.importorskip("torch")
    module = bn_net()
    return module, ortmodule_folder(module, tmp_path / "onnx"), save_state_dict(module, tmp_path / "state.pt")


@pytest.mark.torch
def test_embed_cli_text_and_json(bn_folder, tmp_path, capsys):
    module, folder, state = bn_folder
    out = tmp_path / "text.onnx"
    assert main(["embed", str(folder), str(state), "-o", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    assert "graph net_torch_exported_inference.onnx" in text and f"outputs {OUTPUT}" in text
    assert "names prefixed with '_original_module.'" in text and "not used by the graph: bn.num_batches_tracked" in text
    assert run_both(module, out) <= TOLERANCE
    out = tmp_path / "json.onnx"
    assert main(["embed", str(folder), str(state), "-o", str(out), "--prefix", "net", "--json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["embed"]["unused"] == ["bn.num_batches_tracked"] and data["embed"]["missing"] == []
    assert data["export"]["path"] == str(out) and data["export"]["outputs"] == [OUTPUT]


@pytest.mark.torch
def test_embed_cli_bad_input_exits_2_and_keeps_the_output(bn_folder, tmp_path):
    _, folder, state = bn_folder
    out = tmp_path / "keep.onnx"
    out.write_bytes(b"keep me")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"PK\x03\x04 not really a zip")
    write_decoy(folder / "other_torch_exported_inference.onnx")
    cases = [
        ((folder, state, "-o", out), "several models"),
        ((folder, state, "-o", out, "--prefix", "nope"), "with prefix 'nope'"),
        ((folder, garbage, "-o", out, "--prefix", "net"), "garbage.pt"),
        ((folder, tmp_path / "nope.pt", "-o", out, "--prefix", "net"), "nope.pt"),
        ((folder, state, "-o", out, "--prefix", "other"), "fits nothing in the model"),
    ]
    for args, message in cases:
        proc = cli("embed", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert message in proc.stderr, proc.stderr
        assert out.read_bytes() == b"keep me"


# ---- the normal open/export path -------------------------------------------------------------

@pytest.mark.torch
def test_open_sources_picks_the_graph_and_fits_the_state_dict(bn_folder, tmp_path):
    _, folder, state = bn_folder
    for paths in ([folder, state], [state, *sorted(folder.iterdir(), reverse=True)]):
        loaded = open_sources(paths)
        assert loaded.model_path.name == "net_torch_exported_inference.onnx"
        assert loaded.ortmodule is not None and loaded.ortmodule.prefix == "net" and loaded.others == ()
        assert loaded.alignment is not None and loaded.alignment.added_prefix == "_original_module."
        assert loaded.match.ok and not loaded.match.missing and len(loaded.match.matched) == 8
        assert loaded.match.unexpected == ["_original_module.bn.num_batches_tracked"]
        assert loaded.alignment.unused == ["bn.num_batches_tracked"]
        assert "_original_module.fc1.weight" in loaded.index.parameters
        assert loaded.index.default_outputs() == [OUTPUT]


@pytest.mark.torch
def test_cli_export_and_inspect_with_a_state_dict(bn_folder, tmp_path, capsys):
    module, folder, state = bn_folder
    graph = folder / "net_torch_exported_training.onnx"
    out = tmp_path / "out.onnx"
    assert main(["export", str(graph), "--checkpoint", str(state), "--outputs", OUTPUT, "-o", str(out),
                 "--validate", "-q", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is True
    assert run_both(module, out) <= TOLERANCE
    assert main(["inspect", str(folder), "--checkpoint", str(state), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["file"].endswith("net_torch_exported_inference.onnx")
    assert data["match"]["ok"] and data["match"]["missing"] == []
    assert data["alignment"]["added_prefix"] == "_original_module." and data["ortmodule"]["prefix"] == "net"
    assert "not_used" not in data
    assert main(["inspect", str(folder), "--checkpoint", str(state)]) == 0
    text = capsys.readouterr().out
    assert "ORTModule graphs net:" in text and "names prefixed with '_original_module.'" in text


# ---- a parameter file that does not fit ---------------------------------------------------------

def graph_with_weights(tmp_path: Path) -> Path:
    """y = (x @ fc1.weight + fc1.bias) @ fc2.weight + fc2.bias, weights held as initializers."""
    rng = np.random.default_rng(0)
    weights = {"fc1.weight": (4, 4), "fc1.bias": (4,), "fc2.weight": (4, 3), "fc2.bias": (3,)}
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in weights.items()]
    nodes = [helper.make_node("MatMul", ["x", "fc1.weight"], ["a"]), helper.make_node("Add", ["a", "fc1.bias"], ["b"]),
             helper.make_node("MatMul", ["b", "fc2.weight"], ["c"]), helper.make_node("Add", ["c", "fc2.bias"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 3])], inits)
    path = tmp_path / "graph.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_embed_refuses_a_file_for_another_model_unless_partial_is_allowed(tmp_path, capsys):
    graph = graph_with_weights(tmp_path)
    state = tmp_path / "other.npz"
    other = {f"head.{i}.weight": np.ones((4, 4), np.float32) for i in range(7)}
    np.savez(state, **{"fc1.weight": np.ones((4, 4), np.float32), "fc1.bias": np.ones(4, np.float32), **other})
    out = tmp_path / "out.onnx"
    out.write_bytes(b"keep me")
    assert main(["embed", str(graph), str(state), "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "only partly: 2 of 9 parameters matched, 7 unexpected" in err[0]
    assert "7 entries are not used" in err[0]
    assert "head.0.weight" in err[0] and "2 model weights" in err[0] and "fc2.weight" in err[0]
    assert "--allow-partial" in err[0]
    assert out.read_bytes() == b"keep me"

    assert main(["embed", str(graph), str(state), "-o", str(out), "-q", "--allow-partial", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["embed"]["stayed"] == ["fc2.weight", "fc2.bias"]
    written = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}
    assert (written["fc1.weight"] == 1).all() and not (written["fc2.weight"] == 1).all()


def test_embed_takes_a_file_whose_extra_entries_are_unused_when_every_weight_is_replaced(tmp_path):
    graph = graph_with_weights(tmp_path)
    state = tmp_path / "state.npz"
    shapes = {"fc1.weight": (4, 4), "fc1.bias": (4,), "fc2.weight": (4, 3), "fc2.bias": (3,), "head.weight": (2, 2)}
    np.savez(state, **{n: np.ones(s, np.float32) for n, s in shapes.items()})
    result = embed_state_dict(graph, state, tmp_path / "out.onnx")
    assert result.alignment.unused == ["head.weight"] and result.stayed == []
