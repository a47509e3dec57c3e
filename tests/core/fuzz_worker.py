"""The fuzz tests' reader process: onnxport's readers run on crafted files under a memory cap.

Why a separate process: a reader that lacks a guard may allocate terabytes, loop or crash; run
here, that fails one example instead of taking the machine down. The process caps its address
space (RLIMIT_AS: its size after imports + HEADROOM), bounds each request's CPU time (RLIMIT_CPU:
CPU_BUDGET_S more than it had used; a reader that grinds is killed by SIGXCPU, however loaded the
machine) and measures each request's peak RSS. It says it is ready once its imports are done.

Protocol: one JSON line per request on stdin, {"target": ..., "path": ...}; one JSON line back,
{"outcome": "ok" | "refused" | "bug", "detail": text, "peak_mib": growth of peak RSS}. "refused"
is an OnnxportError (the reader said no in one line); "bug" is anything else: another exception
type, a tensor that cannot be materialized or does not match its declared shape, an external
reference outside the model's folder, a program loaded without trust, a sparse tensor accepted
that ONNX Runtime cannot densify (ORT is the oracle, for dense forms up to ORACLE_DENSE_MAX). Every request runs its
target's reader, then the sniffing entry (`sniff` + `read_parameters`/`load_graph`) on the same path;
the "sniff" target is `open_sources`, the way the CLI and the app open what they are given.
`FuzzWorker` (parent side) starts, talks to and restarts the process.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import traceback
from pathlib import Path

HEADROOM = 2 << 30
CPU_BUDGET_S = 10  # CPU seconds one request may use
HANG_BOUND_S = 300.0  # a request that blocks without using CPU (a bound against a hang, not a measurement)
STARTUP_BOUND_S = 600.0  # for the worker's imports (torch...) on a loaded machine: the same kind of bound
ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


# --------------------------------------------------------------------------------------------
# worker side


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _touch_params(params) -> None:
    import numpy as np

    from onnxport.core.util.errors import NominalCheckpointError

    tensors = list(params.values())
    tensors += [t for g in params.optimizer_groups for moments in g.states.values() for t in moments.values()]
    _ = (dict(params.properties), params.trainable, params.frozen, params.nbytes)
    for t in tensors:
        if not all(type(d) is int and d >= 0 for d in t.shape):
            raise AssertionError(f"tensor '{t.name}' has shape {t.shape!r}: not whole numbers >= 0")
        if params.nominal:
            try:
                t.array()
            except NominalCheckpointError:
                continue
            raise AssertionError(f"nominal tensor '{t.name}' returned values")
        values = np.asarray(t.array())
        if tuple(values.shape) != tuple(t.shape):
            raise AssertionError(f"tensor '{t.name}' declares shape {t.shape} but loads as {values.shape}")
        if values.dtype != object:
            values.sum()
        _ = (t.nbytes, t.dtype, t.file_span())


def _read_checkpoint(path: Path) -> None:
    from onnxport.core.io.checkpoint import read_checkpoint

    _touch_params(read_checkpoint(path))


def _read_safetensors(path: Path) -> None:
    from onnxport.core.io.param_files import read_safetensors

    _touch_params(read_safetensors(path))


def _read_npz(path: Path) -> None:
    from onnxport.core.io.param_files import read_npz

    _touch_params(read_npz(path))


def _read_state_dict(path: Path) -> None:
    from onnxport.core.io.param_files import read_state_dict

    _touch_params(read_state_dict(path))


def _check_pt2(path: Path) -> None:
    import torch

    from onnxport.core.pytorch.pt2_check import check_pt2_archive

    check_pt2_archive(path, torch)


def _read_onnx(path: Path) -> None:
    import numpy as np
    import onnx

    from onnxport.core.graph.const_tensors import from_initializer
    from onnxport.core.graph.index import build_index
    from onnxport.core.io.external_data import external_reference, iter_tensors
    from onnxport.core.io.model_io import load_graph

    model = load_graph(path)
    folder = path.parent.resolve()
    for label, t in iter_tensors(model):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            ref = external_reference(t, path.parent, label)
            if folder not in ref.path.parents:
                raise AssertionError(f"{label}: external data read outside the folder: {ref.path}")
        values = from_initializer(t, path.parent).values()
        if tuple(np.shape(values)) != tuple(t.dims):
            raise AssertionError(f"{label}: dims {list(t.dims)} but loads as {np.shape(values)}")
    _sparse_densify(model, path.parent)
    build_index(model, path)


ORACLE_DENSE_MAX = 16 * MiB  # sparse tensors ORT densifies here, as the oracle of what load_graph accepts


def _sparse_densify(model, folder: Path) -> None:
    """Every sparse tensor `load_graph` accepted is one ONNX Runtime densifies, to its dense shape."""
    import math

    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import helper

    from onnxport.core.io.sparse_tensors import iter_sparse

    for where, sparse in iter_sparse(model):
        if math.prod(sparse.dims) * 8 > ORACLE_DENSE_MAX or sparse.values.data_location == onnx.TensorProto.EXTERNAL \
                or sparse.indices.data_location == onnx.TensorProto.EXTERNAL:
            continue
        copy = onnx.SparseTensorProto()
        copy.CopyFrom(sparse)
        copy.values.name = "S"
        graph = helper.make_graph([helper.make_node("Identity", ["S"], ["y"])], "oracle", [],
                                  [helper.make_tensor_value_info("y", copy.values.data_type, None)],
                                  sparse_initializer=[copy])
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        try:
            session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
            dense = session.run(None, {})[0]
        except Exception as exc:  # noqa: BLE001 - ORT's own exception types
            if any(s in str(exc) for s in ("MLDataType", "not currently registered", "No corresponding Numpy")):
                continue  # a value type ORT runs nowhere (the sparse tensor is not what it refuses)
            raise AssertionError(f"sparse tensor ({where}) accepted, but ONNX Runtime refuses it: "
                                 f"{str(exc).splitlines()[0][-200:]}") from None
        if tuple(np.shape(dense)) != tuple(sparse.dims):
            raise AssertionError(f"sparse tensor ({where}): dims {list(sparse.dims)} densify as {np.shape(dense)}")


def _sniffed(path: Path) -> None:
    """The sniffing entry, as `open_sources` uses it."""
    from onnxport.core.io.kinds import PARAMETER_KINDS, SourceKind, sniff
    from onnxport.core.io.readers import read_parameters
    from onnxport.core.pytorch.sources import load_program
    from onnxport.core.pytorch.trust import UntrustedProgramError

    kind = sniff(path)
    if kind in PARAMETER_KINDS:
        _touch_params(read_parameters(path, kind))
    elif kind == SourceKind.ONNX:
        _read_onnx(path)
    elif kind in (SourceKind.TORCH_EXPORT, SourceKind.TORCHSCRIPT):
        if kind == SourceKind.TORCH_EXPORT:
            _check_pt2(path)
        try:
            load_program(path)  # no trust given: must refuse before loading anything
        except UntrustedProgramError:
            return
        raise AssertionError(f"{path}: a {kind.value} program was loaded without trust")


def _memory_probe(path: Path) -> None:
    """Allocate past the cap: shows the cap turns a missing guard into a failed example."""
    bytearray(2 * HEADROOM).__len__()


def _cpu_probe(path: Path) -> None:
    """Grind forever: shows the CPU bound turns a reader that loops into a failed example."""
    while True:
        pass


def _open_sources(path: Path) -> None:
    from onnxport.core.workflow.sources import open_sources

    open_sources([path])  # sniff, classify, read, load, index and match, as the CLI and the app open files


SMALL_ENOUGH_TO_GENERATE = 64 * MiB  # accepted inputs up to this are generated and checked here


def _options(path: Path) -> None:
    """Option values (options.json beside the model): the sizes generated inputs would take must
    pass the budget gate exactly when the independent oracle says so (small ones are generated and
    checked), and the deploy side (target, fixed shapes, opset fit, target check) ends in a model
    or OnnxportError."""
    import copy

    from onnxport.core.cli.input_options import parse_dims, parse_shapes
    from onnxport.core.deploy.shapes import apply_shapes, parse_shape_options
    from onnxport.core.deploy.targets import parse_target
    from onnxport.core.deploy.versions import fit_versions
    from onnxport.core.evaluate.input_shapes import ShapePlan
    from onnxport.core.evaluate.input_specs import input_specs
    from onnxport.core.evaluate.input_values import check_generated_size, generate
    from onnxport.core.io.model_io import load_graph
    from onnxport.core.util import budgets
    from onnxport.core.util.errors import OnnxportError
    from tests.core.fuzz_options import budget_oracle

    options = json.loads(path.with_name("options.json").read_text())
    model = load_graph(path)
    try:  # the deploy side first: its refusals must not hide the generating side's
        target, request = parse_target(options["target"]), parse_shape_options(options["shapes"], options["dims"])
        fixed, _ = apply_shapes(copy.deepcopy(model), request)
        if not target.mobile:
            fit_versions(fixed, target)
    except OnnxportError:
        pass
    specs = input_specs(model)
    dims = parse_dims([d for d in options["dims"] if not d.endswith("=dynamic")])
    plan = ShapePlan(specs, model, dim_sizes=dims, shapes=parse_shapes(options["shapes"]), batch=options["batch"])
    shapes, count = plan.shapes(), options["count"]
    within = budget_oracle([(list(shapes[s.name]), s.dtype.itemsize) for s in specs], count,
                           budgets.GENERATED_INPUT_MAX, budgets.GENERATED_TOTAL_MAX)
    try:
        check_generated_size(specs, shapes, count)
    except OnnxportError:
        if within:
            raise AssertionError(f"refused sizes within the budget: {shapes} x {count}") from None
        raise
    if not within:
        raise AssertionError(f"accepted sizes past the budget: {shapes} x {count}")
    total = sum(budgets.declared_bytes(shapes[s.name], s.dtype.itemsize) for s in specs) * count
    if total <= SMALL_ENOUGH_TO_GENERATE:
        for feed in generate(specs, shapes, count):
            for spec in specs:
                if tuple(feed[spec.name].shape) != tuple(shapes[spec.name]):
                    raise AssertionError(f"{spec.name}: planned {shapes[spec.name]}, generated {feed[spec.name].shape}")


TARGETS = {"checkpoint": _read_checkpoint, "safetensors": _read_safetensors, "npz": _read_npz,
           "state_dict": _read_state_dict, "pt2": _check_pt2, "onnx": _read_onnx, "sniff": _open_sources,
           "memory_probe": _memory_probe, "cpu_probe": _cpu_probe, "options": _options}


def _handle(request: dict) -> dict:
    from onnxport.core.util.errors import OnnxportError

    path = Path(request["path"])
    try:
        TARGETS[request["target"]](path)
        _sniffed(path)
    except OnnxportError as exc:
        return {"outcome": "refused", "detail": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - the point: anything else is a finding
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-6))
        return {"outcome": "bug", "detail": f"{type(exc).__name__}: {exc}\n{detail}"}
    return {"outcome": "ok", "detail": ""}


def serve() -> None:
    """The worker's loop (stdin/stdout); stray prints go to stderr."""
    import numpy  # noqa: F401 - imports first, so the cap is measured over them
    import onnx  # noqa: F401
    import torch  # noqa: F401
    import torch.export  # noqa: F401

    from onnxport.core.graph import index  # noqa: F401
    from onnxport.core.io import checkpoint, param_files  # noqa: F401
    from onnxport.core.pytorch import pt2_check, sources  # noqa: F401
    from onnxport.core.workflow import sources as workflow_sources  # noqa: F401

    checkpoint.SAFETY_NET = ()  # a missed bounds check must surface as what it is
    limit = _status("VmSize") + HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    peak_reset = Path("/proc/self/clear_refs")
    for line in sys.stdin:
        try:
            peak_reset.write_text("5")
        except OSError:
            pass
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu = int(used.ru_utime + used.ru_stime) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu + CPU_BUDGET_S, resource.RLIM_INFINITY))
        base = _status("VmRSS")
        reply = _handle(json.loads(line))
        reply["peak_mib"] = max(0, _status("VmHWM") - base) / MiB
        out.write(json.dumps(reply) + "\n")
        out.flush()


# --------------------------------------------------------------------------------------------
# parent side

BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from tests.core.fuzz_worker import serve; serve()"


class FuzzWorker:
    """Runs requests in the worker process; a dead or hung process is reported and replaced."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        """The worker, once it says it is ready (its imports done: they are not a request's time)."""
        with open(self.log, "ab") as err:
            proc = subprocess.Popen([sys.executable, "-c", BOOT, str(ROOT)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=err, cwd=ROOT)
        ready, _, _ = select.select([proc.stdout], [], [], STARTUP_BOUND_S)
        if not ready or json.loads(proc.stdout.readline() or b"{}").get("ready") is not True:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"the fuzz worker did not start; its stderr is in {self.log}")
        return proc

    def read(self, target: str, path: Path) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        proc.stdin.write((json.dumps({"target": target, "path": str(path)}) + "\n").encode())
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], HANG_BOUND_S)
        line = proc.stdout.readline() if ready else b""
        if line:
            return json.loads(line)
        if not ready:
            proc.kill()
        code = proc.wait()
        self.proc = None
        if not ready:
            why = f"blocked over {HANG_BOUND_S:.0f} s"
        elif code == -signal.SIGXCPU:
            why = f"used over {CPU_BUDGET_S} s of CPU"
        else:
            why = f"the reader process died (exit {code})"
        return {"outcome": "bug", "detail": f"{why}; its stderr is in {self.log}", "peak_mib": 0.0}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
