"""The child side of the training boundary: runs inside the training environment.

The training environment's child (util/child_main.py) loads this file by its path and calls its
operations (`ping`, `artifacts`, `train`, `export`, `checkpoint`) as `op(args, data, channel)`:
JSON args in, a JSON result out, progress through `channel.progress`. That environment holds the
deprecated `onnxruntime-training` 1.19.2 (with `onnx<1.18`, torch) and no onnxport, so this file
imports only the standard library, numpy, onnx and onnxruntime: it must stay self-contained.
A `UserError` (caused by the inputs: ORT refused a graph) comes back as one line; anything else as
an internal failure. Files are passed by path both ways; the parent owns every destination (it
hands the child temp paths and renames them into place), so a killed child leaves nothing the
parent cannot remove.
"""

from __future__ import annotations

import os
import sys


class UserError(Exception):
    """A failure caused by the inputs (ORT refused a graph...): reported as one line."""

    user_error = True  # util/child_main.py: the caller shows its message as it is


def _one_line(exc: BaseException) -> str:
    """The first line of an error, without ORT's C++ `file:line function(...)` prefix."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    line = text.splitlines()[0]
    marker = line.find("[ONNXRuntimeError]")
    if marker > 0:
        line = line[marker:]
    return line[:600]


def ping(args: dict, data: bytes = b"", channel=None) -> dict:
    import onnx
    import onnxruntime
    from onnxruntime.training import artifacts  # noqa: F401  (proves the training package imports)

    return {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__, "python": sys.version.split()[0]}


def artifacts(args: dict, data: bytes = b"", channel=None) -> dict:
    """onnxruntime.training.artifacts.generate_artifacts on a (pre-repaired) forward graph."""
    import onnx
    import onnxruntime
    from onnxruntime.training import artifacts

    onnxruntime.set_default_logger_severity(3)
    channel.progress(0.05, "reading the forward graph")
    model = onnx.load(args["forward"])
    loss = getattr(artifacts.LossType, args["loss"]) if args.get("loss") else None
    optimizer = getattr(artifacts.OptimType, args["optimizer"]) if args.get("optimizer") else None
    channel.progress(0.1, "building the gradient graph (onnxruntime.training)")
    try:
        artifacts.generate_artifacts(
            model, requires_grad=list(args["requires_grad"]), frozen_params=list(args["frozen"]) or None,
            loss=loss, optimizer=optimizer, artifact_directory=args["out_dir"],
            loss_input_names=[args["loss_input"]] if args.get("loss_input") and loss else None,
            nominal_checkpoint=bool(args.get("nominal")))
    except Exception as exc:  # ORT raises RuntimeError/Fail/InvalidGraph with C++ file:line prefixes
        raise UserError(f"onnxruntime.training could not build the training graph: {_one_line(exc)}") from None
    return {"files": sorted(os.listdir(args["out_dir"]))}


def _module(args: dict, state):
    from onnxruntime.training.api import Module

    try:
        return Module(args["training_model"], state, args.get("eval_model"))
    except Exception as exc:
        raise UserError(f"onnxruntime.training cannot load the training graphs: {_one_line(exc)}") from None


def _load_state(path: str):
    from onnxruntime.training.api import CheckpointState

    try:
        return CheckpointState.load_checkpoint(path)
    except Exception as exc:
        raise UserError(f"onnxruntime.training cannot load the checkpoint {path}: {_one_line(exc)}") from None


def train(args: dict, data: bytes = b"", channel=None) -> dict:
    """Run `steps` optimizer steps; batch i is the arrays `b{i}_0`, `b{i}_1`... of `batches` (npz)."""
    import numpy as np
    from onnxruntime.training.api import CheckpointState, Optimizer

    state = _load_state(args["checkpoint"])
    module = _module(args, state)
    optimizer = Optimizer(args["optimizer_model"], module)
    if args.get("learning_rate") is not None:
        optimizer.set_learning_rate(float(args["learning_rate"]))
    losses = []
    with np.load(args["batches"]) as data:
        steps = int(args["steps"])
        module.train()
        for step in range(steps):
            count = sum(1 for k in data.files if k.startswith(f"b{step}_"))
            batch = [data[f"b{step}_{j}"] for j in range(count)]
            try:
                loss = module(*batch)
            except Exception as exc:
                raise UserError(f"training step {step} failed: {_one_line(exc)}") from None
            losses.append(float(np.asarray(loss)))
            optimizer.step()
            module.lazy_reset_grad()
            channel.progress((step + 1) / steps, f"step {step + 1}/{steps}")
    if args.get("eval_model"):
        module.eval()
    for key, value in (args.get("properties") or {}).items():
        state.properties[key] = value
    CheckpointState.save_checkpoint(state, args["out_checkpoint"],
                                    include_optimizer_state=bool(args.get("include_optimizer_state", True)))
    return {"losses": losses}


def export(args: dict, data: bytes = b"", channel=None) -> dict:
    """ORT's own Module.export_model_for_inferencing (the reference onnxport is held against)."""
    state = _load_state(args["checkpoint"])
    module = _module(args, state)
    module.eval()
    try:
        module.export_model_for_inferencing(args["out"], list(args["outputs"]))
    except Exception as exc:
        raise UserError(f"onnxruntime.training could not export: {_one_line(exc)}") from None
    return {"out": args["out"]}


def checkpoint(args: dict, data: bytes = b"", channel=None) -> dict:
    """What ORT's CheckpointState sees: names, requires_grad, properties; values into an npz."""
    import numpy as np

    state = _load_state(args["checkpoint"])
    names = list(state._state.parameter_names())  # (the public iterator fails on nominal states)
    requires_grad, values, refused = {}, {}, None
    for name in names:
        try:
            parameter = state.parameters[name]
            requires_grad[name] = bool(parameter.requires_grad)
            values[name] = np.array(parameter.data)
        except Exception as exc:  # a nominal checkpoint holds names, no values
            requires_grad[name] = None
            refused = _one_line(exc)
    result = {"parameters": requires_grad,
              "properties": dict(state.properties)}  # iterating yields (name, value) pairs
    if refused is not None:
        result["values_refused"] = refused
    elif args.get("values"):
        np.savez(args["values"], **{f"p{i}": values[name] for i, name in enumerate(names)})
        result["value_keys"] = {name: f"p{i}" for i, name in enumerate(names)}
    return result
