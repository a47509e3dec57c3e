"""ONNX's own backend test models run through onnxport's CLI, one model at a time.

The models (`node`, `pytorch-converted`, `pytorch-operator`, `simple`, `light` under
`onnx/backend/test/data`, ~1,750 models nobody here wrote, with inputs and expected outputs in
`test_data_set_0/*.pb`) ship in onnx wheels up to 1.19.x; `make` unpacks the 1.19.1 wheel's copy
as test data (corpus.onnx_backend_data). `run_model(model, work)` runs, in this process, through
`onnxport.core.cli.main`: inspect, export of all graph outputs, export of one mid tensor,
validate (the export against the source) and quantize --mode dynamic, and classifies each step:
- ok: a correct result (exit 0, a valid file, the right numbers);
- refused: exit 2 with its one line, no traceback;
- crash: a traceback (an exception escaping `main`) or an exit other than 0/2;
- invalid: a written model `onnx.checker` (full check) refuses where the source passes it, or that
  ONNX Runtime cannot load where it loads the source;
- wrong: numbers that differ from what ONNX Runtime gives on the source (the graph outputs, also
  held against the expected outputs; the mid tensor), or a failed validate;
- n/a: nothing to do (no mid tensor in a one-node graph).
`ort_runs` says whether ONNX Runtime runs the source on its test inputs: models it cannot run are
counted apart by the runner (corpus_run.py). The step being run is reported through `on_step`
before it starts, so that a process killed by a crash still names it.
"""

from __future__ import annotations

import contextlib
import io
import json
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.cli import main

STEPS = ("inspect", "export", "mid", "validate", "quantize")
OUTCOMES = ("ok", "refused", "crash", "invalid", "wrong", "n/a")
BAD_OUTCOMES = ("crash", "invalid", "wrong")
SUITES = ("node", "pytorch-converted", "pytorch-operator", "simple", "light")
RTOL, ATOL = 1e-3, 1e-5


@dataclass(frozen=True)
class BackendModel:
    name: str  # "node/test_abs"
    path: Path  # its model.onnx
    data: Path | None  # its test_data_set_0 (None for light models: expected outputs only)


@dataclass
class ModelResult:
    name: str
    ort_runs: bool = False
    steps: dict[str, str] = field(default_factory=dict)  # step -> outcome
    notes: dict[str, str] = field(default_factory=dict)  # step -> why (crash, invalid, wrong, refused)

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "ort_runs": self.ort_runs, "steps": self.steps, "notes": self.notes})


def backend_models(root: Path) -> list[BackendModel]:
    """Every model of the suites under `root` (onnx/backend/test/data), sorted by name."""
    found = []
    for suite in SUITES:
        folder = root / suite
        if suite == "light":
            found += [BackendModel(f"light/{p.stem}", p, None) for p in sorted(folder.glob("*.onnx"))]
            continue
        for model in sorted(folder.glob("*/model.onnx")):
            data = model.parent / "test_data_set_0"
            found.append(BackendModel(f"{suite}/{model.parent.name}", model, data if data.is_dir() else None))
    return found


def _value(path: Path, vtype: onnx.TypeProto):
    """A test input/output file's value, read by the type it fills (tensor, sequence, optional)."""
    data = path.read_bytes()
    kind = vtype.WhichOneof("value")
    if kind == "sequence_type":
        return numpy_helper.to_list(onnx.SequenceProto.FromString(data))
    if kind == "optional_type":
        return numpy_helper.to_optional(onnx.OptionalProto.FromString(data))
    return numpy_helper.to_array(onnx.TensorProto.FromString(data))


def _generated(model: onnx.ModelProto) -> dict:
    """Inputs for a model without test inputs (the light models: expected outputs only), where its
    data inputs are float tensors of fixed shapes: seeded normal values."""
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in {t.name for t in model.graph.initializer}:
            continue
        tensor = vi.type.tensor_type
        dims = [d.dim_value for d in tensor.shape.dim]
        if tensor.elem_type != onnx.TensorProto.FLOAT or not all(dims):
            return {}
        feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def _test_data(model: onnx.ModelProto, data: Path | None) -> tuple[dict, dict]:
    """(inputs by name, expected outputs by name) of test_data_set_0; without one, generated inputs
    (`_generated`) and no expected outputs."""
    if data is None:
        return _generated(model), {}
    inits = {t.name for t in model.graph.initializer}
    graph_inputs = [vi for vi in model.graph.input if vi.name not in inits]
    feeds = {vi.name: _value(data / f"input_{i}.pb", vi.type) for i, vi in enumerate(graph_inputs)
             if (data / f"input_{i}.pb").is_file()}
    expected = {vi.name: _value(data / f"output_{i}.pb", vi.type) for i, vi in enumerate(model.graph.output)
                if (data / f"output_{i}.pb").is_file()}
    return feeds, expected


def _session(source):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    data = source.SerializeToString() if isinstance(source, onnx.ModelProto) else str(source)
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def _loads(path: Path) -> str | None:
    try:
        _session(path)
    except Exception as exc:  # noqa: BLE001 - ORT's many exception types
        return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return None


def _checks(path: Path) -> str | None:
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as exc:  # noqa: BLE001 - checker and shape-inference errors alike
        return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return None


def _same(got, want) -> bool:
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    if want is None or got is None:
        return got is None and want is None
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "fc":
        return bool(np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True))
    return bool(np.array_equal(got, want))


def _cli(args: list[str]) -> tuple[int | None, str, str]:
    """`onnxport ARGS` in this process: (exit code | None when an exception escaped, stdout, stderr
    or the traceback)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    except Exception:  # noqa: BLE001 - what escapes `main` is the crash being looked for
        return None, out.getvalue(), traceback.format_exc(limit=-3)
    return code, out.getvalue(), err.getvalue()


def _exit_outcome(code: int | None, err: str) -> tuple[str, str]:
    if code is None or "Traceback" in err:
        return "crash", err.strip().splitlines()[-1][:300] if err.strip() else "exception"
    if code == 2:
        return "refused", next((line for line in err.splitlines() if "error:" in line), err.strip()[-300:])[:300]
    if code != 0:
        return "crash", f"exit {code}: {err.strip()[-300:]}"
    return "ok", ""


class _Run:
    """One model's steps: what they share (the source, its ORT session, the test data)."""

    def __init__(self, model: BackendModel, work: Path, on_step: Callable[[str], None]) -> None:
        self.model, self.work, self.on_step = model, work, on_step
        self.result = ModelResult(model.name)
        self.proto = onnx.load(str(model.path))
        self.feeds, self.expected = _test_data(self.proto, model.data)
        self.source_checks = _checks(model.path) is None
        self.source_loads = _loads(model.path) is None
        self.ort_outputs: dict | None = None
        self.inference_mode = _inference_feeds(self.proto, self.feeds)
        self.pinned = any(self.inference_mode[k] is not v for k, v in self.feeds.items())  # training_mode fed False
        if self.source_loads and (self.feeds or not _data_inputs(self.proto)):
            self.on_step("ort")
            try:
                sess = _session(model.path)
                names = [o.name for o in sess.get_outputs()]
                self.ort_outputs = dict(zip(names, sess.run(None, self.inference_mode), strict=True))
            except Exception:  # noqa: BLE001 - ORT cannot run it: counted apart
                self.ort_outputs = None
        self.result.ort_runs = self.ort_outputs is not None

    def set(self, step: str, outcome: str, note: str = "") -> str:
        self.result.steps[step] = outcome
        if note:
            self.result.notes[step] = note
        return outcome

    def written(self, step: str, path: Path) -> bool:
        """Whether `path` is a valid model (else the step is set to invalid)."""
        if self.source_checks:
            problem = _checks(path)
            if problem is not None:
                self.set(step, "invalid", f"onnx.checker: {problem}")
                return False
        if self.source_loads:
            problem = _loads(path)
            if problem is not None:
                self.set(step, "invalid", f"ONNX Runtime cannot load it: {problem}")
                return False
        return True

    def step(self, step: str, args: list[str]) -> str:
        self.on_step(step)
        code, _out, err = _cli(args)
        outcome, note = _exit_outcome(code, err)
        return self.set(step, outcome, note)

    def numbers(self, step: str, path: Path, want: dict) -> None:
        """Run `path` on the test inputs and compare its outputs with `want` (by name)."""
        try:
            sess = _session(path)
            names = [o.name for o in sess.get_outputs()]
            feed = {i.name: self.feeds[i.name] for i in sess.get_inputs()}
            got = dict(zip(names, sess.run(None, feed), strict=True))
        except Exception as exc:  # noqa: BLE001
            self.set(step, "wrong", f"ONNX Runtime cannot run it where it runs the source: {str(exc)[:200]}")
            return
        bad = [n for n in want if n in got and not _same(got[n], want[n])]
        if bad:
            self.set(step, "wrong", f"differs from ONNX Runtime on the source: {', '.join(bad[:3])}")


def _inference_feeds(model: onnx.ModelProto, feeds: dict) -> dict:
    """`feeds` with every Dropout's `training_mode` input fed False: an export is an inference
    model (its Dropouts pass their input through), so that is the source run it must equal."""
    feeds = dict(feeds)
    for node in model.graph.node:
        if node.op_type == "Dropout" and len(node.input) > 2 and node.input[2] in feeds:
            feeds[node.input[2]] = np.array(False)
    return feeds


def _data_inputs(model: onnx.ModelProto) -> list[str]:
    inits = {t.name for t in model.graph.initializer}
    return [vi.name for vi in model.graph.input if vi.name not in inits]


MID_TENSORS = 3  # per model: the first, middle and last intermediate tensors


def mid_tensors(model: onnx.ModelProto, limit: int = MID_TENSORS) -> list[str]:
    """The tensors the mid-tensor exports keep: intermediate tensors (no graph output) from the
    first, middle and last nodes that make one."""
    outputs = {o.name for o in model.graph.output}
    found = list(dict.fromkeys(o for node in model.graph.node for o in node.output if o and o not in outputs))
    if len(found) <= limit:
        return found
    return [found[round(i * (len(found) - 1) / (limit - 1))] for i in range(limit)]


def run_model(model: BackendModel, work: Path, on_step: Callable[[str], None] = lambda step: None) -> ModelResult:
    """See the module docstring. `work` is an empty folder for this model's files."""
    run = _Run(model, work, on_step)
    src = str(model.path)
    run.step("inspect", ["inspect", src, "--json"])
    outputs = [o.name for o in run.proto.graph.output]
    exported = work / "export.onnx"
    if run.step("export", ["export", src, "--outputs", ",".join(outputs), "-o", str(exported), "-q"]) == "ok" \
            and run.written("export", exported) and run.ort_outputs is not None:
        run.numbers("export", exported, run.ort_outputs)
        if run.result.steps["export"] == "ok" and run.expected and not run.pinned:
            ort_right = all(_same(run.ort_outputs.get(n), v) for n, v in run.expected.items())
            if ort_right:  # ORT's own numbers match the expected ones: so must the export's
                run.numbers("export", exported, run.expected)
    _mid(run, src)
    _validate(run, src, exported)
    quantized = work / "quantized.onnx"
    args = ["quantize", src, "-o", str(quantized), "--mode", "dynamic", "-q"]
    if run.feeds and all(isinstance(v, np.ndarray) for v in run.feeds.values()):
        np.savez(work / "inputs.npz", **run.feeds)
        args += ["--validation-inputs", str(work / "inputs.npz")]
    if run.step("quantize", args) == "ok" and quantized.is_file():
        run.written("quantize", quantized)
    return run.result


def _mid(run: _Run, src: str) -> None:
    """Each of `mid_tensors` exported on its own; the step's outcome is the worst of theirs."""
    names = mid_tensors(run.proto)
    if not names:
        run.set("mid", "n/a")
        return
    worst = ("ok", "")
    for i, name in enumerate(names):
        outcome = _one_mid(run, src, name, run.work / f"mid{i}.onnx")
        if RANK[outcome[0]] > RANK[worst[0]]:
            worst = outcome
    run.result.notes.pop("mid", None)
    run.set("mid", *worst)


RANK = {"ok": 0, "n/a": 0, "refused": 1, "wrong": 2, "invalid": 3, "crash": 4}


def _one_mid(run: _Run, src: str, name: str, mid: Path) -> tuple[str, str]:
    run.result.notes.pop("mid", None)
    if run.step("mid", ["export", src, "--outputs", name, "-o", str(mid), "-q"]) == "ok" and run.written("mid", mid) \
            and run.ort_outputs is not None:
        probe = onnx.ModelProto()
        probe.CopyFrom(run.proto)
        probe.graph.output.append(onnx.ValueInfoProto(name=name))
        try:
            want = dict(zip([name], _session(probe).run([name], run.inference_mode), strict=True))
        except Exception:  # noqa: BLE001 - ORT cannot give that tensor: nothing to hold it against
            want = None
        if want is not None:
            run.numbers("mid", mid, want)
    outcome = run.result.steps["mid"]
    return outcome, f"{name}: {run.result.notes.get('mid', '')}" if outcome != "ok" else ""


def _validate(run: _Run, src: str, exported: Path) -> None:
    if run.result.steps.get("export") not in ("ok", "wrong") or not exported.is_file():
        run.set("validate", "n/a")
        return
    args = ["validate", str(exported), "--reference", src, "--json", "-q"]
    if run.feeds and all(isinstance(v, np.ndarray) and v.dtype != object for v in run.feeds.values()):
        np.savez(run.work / "inputs.npz", **run.feeds)
        args += ["--inputs", str(run.work / "inputs.npz")]
    run.on_step("validate")
    code, out, err = _cli(args)
    if code == 1:  # ran, and the export does not match its source
        run.set("validate", "wrong", out.strip()[-300:])
        return
    run.set("validate", *_exit_outcome(code, err))
