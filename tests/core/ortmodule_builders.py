"""Folders of graphs as ORTModule saves them, built without ORTModule (it cannot import with torch >= 2.9).

ORTModule exports `_FlattenedModule(user_module)` (the user's module under `_original_module`) with
`torch.onnx.export(..., export_params=False, keep_initializers_as_inputs=True,
do_constant_folding=False, training=<mode>)` and saves it as `<prefix>_torch_exported_<mode>.onnx`;
later stages (`optimized`, `execution_model`...) are ORT rewrites, here stood in for by decoys whose
only output is `decoy`, so a test that opens the wrong graph fails on the output names.

torch is imported inside the functions: the module imports where torch is absent.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import onnx
from onnx import TensorProto as T
from onnx import helper

INPUT = "input"
OUTPUT = "output-0"
FEATURES = 8
DECOYS = ("optimized_training", "optimized_inference", "execution_model_training", "execution_model_inference",
          "optimized_pre_grad_training")


def mlp(seed: int = 0):
    """Linear-ReLU-Linear with named layers (state_dict: fc1.weight, fc1.bias, fc2.weight, fc2.bias)."""
    import torch
    from torch import nn

    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(FEATURES, 16)
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    torch.manual_seed(seed)
    return Mlp().eval()


def bn_net(seed: int = 0):
    """Linear-BatchNorm-ReLU-Dropout-Linear with trained running statistics (and num_batches_tracked)."""
    import torch
    from torch import nn

    class BnNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(FEATURES, 16)
            self.bn = nn.BatchNorm1d(16)
            self.drop = nn.Dropout(0.3)
            self.fc2 = nn.Linear(16, 3)

        def forward(self, x):
            return self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))

    torch.manual_seed(seed)
    model = BnNet().train()
    with torch.no_grad():  # non-trivial running statistics
        for _ in range(4):
            model(torch.randn(16, FEATURES) * 2 + 0.5)
    return model.eval()


def _flattened(module):
    from torch import nn

    class FlattenedModule(nn.Module):  # what ORTModule exports: the user's module as an attribute
        def __init__(self, inner) -> None:
            super().__init__()
            self._original_module = inner

        def forward(self, *args):
            return self._original_module(*args)

    return FlattenedModule(module)


def export_like_ortmodule(module, path: Path, mode: str) -> Path:
    """One `<prefix>_torch_exported_<mode>.onnx` as ORTModule's exporter writes it (parameters are inputs)."""
    import torch

    wrapper = _flattened(copy.deepcopy(module))  # a training-mode trace updates BatchNorm's statistics
    training = torch.onnx.TrainingMode.TRAINING if mode == "training" else torch.onnx.TrainingMode.EVAL
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes on BatchNorm's num_batches_tracked: expected here
        torch.onnx.export(wrapper, (torch.randn(2, FEATURES),), str(path), export_params=False,
                          keep_initializers_as_inputs=True, do_constant_folding=False, training=training,
                          input_names=[INPUT], output_names=[OUTPUT],
                          dynamic_axes={INPUT: {0: "batch"}, OUTPUT: {0: "batch"}}, opset_version=17, dynamo=False)
    return path


def write_decoy(path: Path) -> Path:
    """A stand-in for a later-stage graph: a valid model whose only output is `decoy`."""
    graph = helper.make_graph([helper.make_node("Identity", [INPUT], ["decoy"], name="decoy")], "decoy",
                              [helper.make_tensor_value_info(INPUT, T.FLOAT, ["batch", FEATURES])],
                              [helper.make_tensor_value_info("decoy", T.FLOAT, ["batch", FEATURES])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def ortmodule_folder(module, folder: Path, prefix: str = "net", modes: tuple[str, ...] = ("training", "inference"),
                     decoys: tuple[str, ...] = DECOYS) -> Path:
    """A folder of `<prefix>_*.onnx` as `DebugOptions(save_onnx=True, onnx_prefix=prefix)` leaves it."""
    folder.mkdir(parents=True, exist_ok=True)
    for mode in modes:
        export_like_ortmodule(module, folder / f"{prefix}_torch_exported_{mode}.onnx", mode)
    for name in decoys:
        write_decoy(folder / f"{prefix}_{name}.onnx")
    return folder


def save_state_dict(module, path: Path, key_prefix: str = "") -> Path:
    """torch.save(state_dict) with every key prefixed (DDP: 'module.', torch.compile: '_orig_mod.')."""
    import torch

    torch.save({key_prefix + k: v for k, v in module.state_dict().items()}, str(path))
    return path


def run_both(module, exported: Path, batch: int = 5, seed: int = 1) -> float:
    """max |ORT(exported) - module.eval()| on random inputs."""
    import numpy as np
    import onnxruntime as ort
    import torch

    x = np.random.default_rng(seed).standard_normal((batch, FEATURES), dtype=np.float32)
    session = ort.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
    (got,) = session.run([OUTPUT], {INPUT: x})
    with torch.no_grad():
        want = module.eval()(torch.from_numpy(x)).numpy()
    return float(np.abs(got - want).max())
