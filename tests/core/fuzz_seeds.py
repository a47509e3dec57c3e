"""Seed files for the reader fuzz tests: small VALID files of every kind onnxport reads.

Why valid seeds: random bytes stop at the first magic-byte check; mutations of a valid file get
past it into the parsing that matters (offsets, lengths, headers, shapes). Each seed is written
by the project's own writer or the format's reference writer (write_checkpoint, numpy, the
safetensors package, torch.save, torch.export.save, onnx), then kept as bytes.

A `Seed` is one case folder: `files` (relative path -> bytes), `main` (what the reader is given:
a file, or "." for the folder), `target` (which reader the worker runs, see fuzz_worker) and a
`layout` per file (how fuzz_mutations finds its structural fields).
Also here: `fuzz_settings`, the example budget shared by the fuzz tests (bounded and
derandomized by default; `ONNXPORT_FUZZ_EXAMPLES=N` runs N random examples per test instead).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import onnx
from hypothesis import HealthCheck, settings
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.export.wire_format import varint
from tests.support.checkpoint_writer import write_checkpoint

FUZZ_EXAMPLES = int(os.environ.get("ONNXPORT_FUZZ_EXAMPLES", "0") or 0)


def fuzz_settings(bounded: int, deadline_s: float | None = 2.0) -> settings:
    """`bounded` derandomized examples (make test), or FUZZ_EXAMPLES random ones (make fuzz).

    The deadline (wall-clock) catches a read that hangs or grinds in `make fuzz` only: `make test`
    asserts no wall-clock time (a loaded machine would fail it); there, the readers' examples are
    bounded by CPU time in the fuzz worker (fuzz_worker.CPU_BUDGET_S)."""
    if not FUZZ_EXAMPLES:
        deadline_s = None
    return settings(max_examples=FUZZ_EXAMPLES or bounded, derandomize=not FUZZ_EXAMPLES, database=None,
                    deadline=None if deadline_s is None else timedelta(seconds=deadline_s), print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


@dataclass(frozen=True)
class Seed:
    target: str
    main: str
    files: dict[str, bytes]
    layout: dict[str, str]  # file -> flatbuffer | pbseq | protobuf | zip | safetensors | raw


ARRAYS = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(3, np.float32),
          "n": np.array([1, 2], np.int64), "s": np.array(["a", "bc"], dtype=object), "big": np.zeros(40, np.float64)}


def _folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _checkpoint(folder: Path, external: bool, nominal: bool = False) -> Seed:
    write_checkpoint(folder / "ckpt", ARRAYS, frozen={"b"}, external_data=external, nominal=nominal,
                     properties={"k": 1, "f": 0.5, "s": "v"},
                     optimizer=None if nominal else {"g": {"step": 1, "learning_rate": 0.1, "states": {
                         "w": {"momentum0": np.zeros((3, 4), np.float32), "momentum1": np.ones((3, 4), np.float32)}}}})
    files = _folder_bytes(folder)
    return Seed("checkpoint", "ckpt", files, {n: "flatbuffer" if n == "ckpt" else "raw" for n in files})


def pbseq(tensors: list[onnx.TensorProto]) -> bytes:
    """A message-sequence file: varint count, then varint length + TensorProto per tensor."""
    body = bytearray(varint(len(tensors)))
    for t in tensors:
        data = t.SerializeToString()
        body += varint(len(data)) + data
    return bytes(body)


def _legacy() -> Seed:
    arr = numpy_helper.from_array
    files = {
        "paramtrain_tensors.pbseq": pbseq([arr(ARRAYS["w"], "w"), arr(ARRAYS["n"], "n"),
                                           helper.make_tensor("few", T.FLOAT, [2], [1.5, -2.0])]),
        "paramfrozen_tensors.pbseq": pbseq([arr(ARRAYS["b"], "b"),
                                            arr(np.array([b"x", b"yz"], dtype=object), "s")]),
        "optim_g_momentum0_tensors.pbseq": pbseq([arr(np.zeros((3, 4), np.float32), "w")]),
        "optim_g_properties.pbseq": pbseq([arr(np.array(3, np.int64), "builtin.step"),
                                           arr(np.array(0.1, np.float32), "builtin.initial_learning_rate")]),
        "custom_properties.pbseq": pbseq([arr(np.array(7, np.int64), "k"), arr(np.array(0.5, np.float32), "f"),
                                          arr(np.array(b"v", dtype=object), "s")]),
    }
    return Seed("checkpoint", ".", files, dict.fromkeys(files, "pbseq"))


NPZ_ARRAYS = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "n": np.arange(2, dtype=">i8"),
              "f": np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)), "s": np.array(3, np.int8),
              "e": np.zeros((0, 3), np.float16), "c": np.array([1 + 2j, 3j], np.complex64),
              "b": np.array([True, False, True])}


def _npz(folder: Path, compressed: bool) -> Seed:
    (np.savez_compressed if compressed else np.savez)(folder / "p.npz", **NPZ_ARRAYS)
    return Seed("npz", "p.npz", _folder_bytes(folder), {"p.npz": "zip"})


def _safetensors(folder: Path) -> Seed:
    import torch
    from safetensors.torch import save_file

    tensors = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "h": torch.ones(2, dtype=torch.float16),
               "bf": torch.ones(3, dtype=torch.bfloat16), "n": torch.arange(2), "m": torch.tensor([True, False]),
               "s": torch.tensor(5, dtype=torch.uint8), "e": torch.zeros(0, 2)}
    save_file(tensors, str(folder / "p.safetensors"), metadata={"format": "pt"})
    return Seed("safetensors", "p.safetensors", _folder_bytes(folder), {"p.safetensors": "safetensors"})


def _state_dict(folder: Path, legacy: bool) -> Seed:
    import torch

    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    state = {"w": w, "wt": w.t(), "row": w[1], "b": torch.ones(3, dtype=torch.bfloat16), "n": torch.arange(2),
             "h": torch.zeros(2, dtype=torch.float16)}
    torch.save(state, folder / "sd.pt", _use_new_zipfile_serialization=not legacy)
    return Seed("state_dict", "sd.pt", _folder_bytes(folder), {"sd.pt": "pickle" if legacy else "zip"})


def _pt2(folder: Path) -> Seed:
    import torch

    class Small(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.register_buffer("scale", torch.ones(3))

        def forward(self, x):
            return torch.relu(self.lin(x)) * self.scale

    torch.manual_seed(0)
    program = torch.export.export(Small().eval(), (torch.randn(2, 4),))
    torch.export.save(program, str(folder / "m.pt2"))
    return Seed("pt2", "m.pt2", _folder_bytes(folder), {"m.pt2": "zip"})


def onnx_model() -> onnx.ModelProto:
    """y = If(flag, x @ W + c + float(b), -(x @ W)): initializers (float, fp16 in typed fields, bool,
    strings), a Constant attribute tensor, a sparse initializer and a sub-graph holding a tensor."""
    W = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "W")
    b = helper.make_tensor("b", T.FLOAT16, [3], np.array([1, 2, 3], np.float16))
    flag = numpy_helper.from_array(np.array(True), "flag")
    labels = numpy_helper.from_array(np.array([b"cat", b"dog"], dtype=object), "labels")
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "sp"),
                                       numpy_helper.from_array(np.array([0, 3], np.int64), "sp_idx"), [5])
    const = helper.make_node("Constant", [], ["c"], "const",
                             value=numpy_helper.from_array(np.full(3, 0.5, np.float32), "cval"))
    then_branch = helper.make_graph([helper.make_node("Add", ["h2", "bf"], ["t_out"])], "then", [],
                                    [helper.make_tensor_value_info("t_out", T.FLOAT, [2, 3])])
    neg = numpy_helper.from_array(np.full(3, -1.0, np.float32), "neg")
    else_branch = helper.make_graph([helper.make_node("Mul", ["h", "neg"], ["e_out"])], "else", [],
                                    [helper.make_tensor_value_info("e_out", T.FLOAT, [2, 3])], [neg])
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], "/enc/MatMul"), const,
             helper.make_node("Add", ["h", "c"], ["h2"], "/enc/Add"),
             helper.make_node("Cast", ["b"], ["bf"], "/enc/Cast", to=T.FLOAT),
             helper.make_node("If", ["flag"], ["y"], "/head/If", then_branch=then_branch, else_branch=else_branch)]
    graph = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 3])],
                              [W, b, flag, labels], sparse_initializer=[sparse])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _onnx(folder: Path, external: bool) -> Seed:
    model = onnx_model()
    if external:
        onnx.save_model(model, folder / "model.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                        location="weights.bin", size_threshold=0)
    else:
        onnx.save_model(model, folder / "model.onnx")
    files = _folder_bytes(folder)
    return Seed("onnx", "model.onnx", files, {n: "protobuf" if n.endswith(".onnx") else "raw" for n in files})


def _model_and_checkpoint(folder: Path) -> Seed:
    """A model and a checkpoint of its parameters, opened together (read, matched, aligned)."""
    onnx.save_model(onnx_model(), folder / "model.onnx")
    write_checkpoint(folder / "ckpt", {"W": np.ones((4, 3), np.float32), "b": np.ones(3, np.float16),
                                       "extra": np.zeros(2, np.int64)}, frozen={"b"})
    return Seed("sniff", ".", _folder_bytes(folder), {"model.onnx": "protobuf", "ckpt": "flatbuffer"})


def build_seeds(root: Path) -> dict[str, Seed]:
    """Write every seed under `root` (one folder each) and return them by name."""
    makers = {
        "checkpoint": lambda f: _checkpoint(f, external=False),
        "checkpoint_external": lambda f: _checkpoint(f, external=True),
        "checkpoint_nominal": lambda f: _checkpoint(f, external=False, nominal=True),
        "legacy": lambda f: _legacy(),
        "npz": lambda f: _npz(f, compressed=False),
        "npz_compressed": lambda f: _npz(f, compressed=True),
        "safetensors": _safetensors,
        "state_dict": lambda f: _state_dict(f, legacy=False),
        "state_dict_legacy": lambda f: _state_dict(f, legacy=True),
        "pt2": _pt2,
        "onnx": lambda f: _onnx(f, external=False),
        "onnx_external": lambda f: _onnx(f, external=True),
        "model_and_checkpoint": _model_and_checkpoint,
    }
    seeds = {}
    for name, make in makers.items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        seeds[name] = make(folder)
    return seeds
