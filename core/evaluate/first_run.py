"""Generated inputs that fit the model: the first run happens in a child process that may crash.

Why: generated sizes are guesses (input_shapes.py), and an ONNX Runtime kernel fed sizes a model
was not made for can kill the process outright (SIGFPE, SIGSEGV). So the first run on generated
inputs happens in a child (`first_run_child.run`, by util.child_call); a crash there becomes one line naming the
signal, the model, the input shapes and how to give sizes (`--shape`, `--dim`).

Contract: `fitted_feeds(model_path, inputs, ...)` returns a `FeedSource`:
- given inputs (a file, arrays, a FeedSource) are opened as usual (feeds.open_feeds), not probed;
- else the size choices (input_shapes.ShapePlan) times the value choices (input_values) are tried
  in order in the child, on the model and on `references` (models run on the same inputs), the
  default first; the child is restarted after a crash, at most MAX_CRASHES times. If none runs:
  `OnnxportError`, one line about the default's failure;
- if the child cannot tell (did not start, timed out, cannot load a model) the default is used.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.feeds import FeedsLike, FeedSource, open_feeds
from onnxport.core.evaluate.input_shapes import BATCH, ShapePlan
from onnxport.core.evaluate.input_specs import InputSpec, input_specs
from onnxport.core.evaluate.input_values import generate, value_choices
from onnxport.core.evaluate.runtime import describe_feed, ort_message
from onnxport.core.io.model_io import load_graph
from onnxport.core.util.child_call import ChildDied, start_child
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken

TARGET = "onnxport.core.evaluate.first_run_child:run"
MAX_TRIALS = 24
MAX_CRASHES = 3
TIMEOUT_SECONDS = 300.0


Reference = str | Path | tuple[onnx.ModelProto, Path]  # a model file, or a graph and its weights' folder


def fitted_feeds(model_path: str | Path, inputs: FeedsLike = None, *, model: onnx.ModelProto | None = None,
                 specs: list[InputSpec] | None = None, references: Sequence[Reference] = (), count: int = 2,
                 batch_size: int | None = None, batch: int = BATCH, dim_sizes: Mapping[str, int] | None = None,
                 shapes: Mapping[str, tuple[int, ...]] | None = None, seed: int = 0,
                 cancel: CancelToken | None = None, probe: bool = True) -> FeedSource:
    """See the module docstring; `probe` False: the default sizes, not tried in a child (a model
    too big to load twice: the caller's own run of it is the first)."""
    model_path = Path(model_path)
    graph = model if model is not None else load_graph(model_path)
    specs = specs if specs is not None else input_specs(graph)
    if inputs is not None:
        return open_feeds(inputs, specs, batch_size=batch_size)
    plan = ShapePlan(specs, graph, dim_sizes=dim_sizes, shapes=shapes, batch=batch)
    if not plan.known:
        plan.shapes()  # raises: an input without a declared shape needs a file or --shape
    values = value_choices(graph, specs)
    depth = max((len(v) for v in values.values()), default=1)
    trials = [(choice, v) for v in range(depth) for choice in plan.choices()][:MAX_TRIALS]

    def feed(index: int, n: int = 1) -> list[dict[str, np.ndarray]]:
        choice, v = trials[index]
        chosen = {name: vs[min(v, len(vs) - 1)] for name, vs in values.items()}
        return generate(specs, plan.shapes(choice), n, seed=seed, values=chosen)

    models = [model_path] + [r if isinstance(r, tuple) else Path(r) for r in references
                             if isinstance(r, tuple) or Path(r).is_file()]
    found, failures = _probe(models, feed, len(trials), cancel) if probe else (None, {})
    hint = _hint(plan)
    if found is None and failures:
        raise _failure(model_path.name, failures, feed, hint)
    index = found or 0
    feeds = feed(index, count)
    described = f"{count} generated batch(es): {describe_feed(feeds[0])}"
    if index:
        described += f" (the model did not run on {describe_feed(feed(0)[0])})"
    return FeedSource(specs, described, _feeds=feeds, generated=True, hint=hint,
                      regenerate=lambda n: feed(index, n))


def _hint(plan: ShapePlan) -> str | None:
    guessed = [s.name for s in plan.specs if set(plan.guessed(s.name)) - {"batch"}]
    if not guessed:
        return None if plan.given else "the values were generated: give real inputs from a file"
    given = " ".join(f"--shape {name}={plan.template(name)}" for name in guessed[:3])
    return f"sizes were guessed: give the model's own with {given} (each ? a size)"


def _failure(name: str, failures: dict[int, tuple[str | None, str]], feed, hint: str | None) -> OnnxportError:
    first = min(failures)
    crash, message = failures[first]
    shapes = describe_feed(feed(first)[0])
    text = (f"ONNX Runtime crashed ({crash}) running {name} on inputs {shapes}" if crash else
            f"{name}: ONNX Runtime cannot run it on inputs {shapes}: {ort_message(message)}")
    if len(failures) > 1:
        text += f"; {len(failures) - 1} other size(s) failed too"
    return OnnxportError(text, hint=hint)


def _probe(models: list[Path], feed, total: int, cancel: CancelToken | None):
    """(index of the first trial every model runs | None, {trial: (signal name | None, message)}).
    (None, {}) when the child could not tell."""
    if getattr(sys, "frozen", False):
        return None, {}
    failures: dict[int, tuple[str | None, str]] = {}
    crashes = 0
    with tempfile.TemporaryDirectory(prefix="onnxport-first-run-") as tmp:
        folder = Path(tmp)
        written = _write(folder, feed, range(1))
        start, phase_end = 0, 1
        while start < total:
            events, status = _run_child(folder, models, written, start, cancel)
            if status is None or any(e.get("event") == "load" for e in events):
                return None, {}
            for e in events:
                if e.get("event") == "ok":
                    return e["trial"], failures
                if e.get("event") == "error":
                    failures[e["trial"]] = (None, e.get("message", ""))
            started = [e["trial"] for e in events if e.get("event") == "start"]
            if status < 0 and started:  # died by a signal while running the last trial it started
                failures[started[-1]] = (_signal_name(-status), "")
                crashes += 1
                start = started[-1] + 1
            elif not started:
                return None, {}
            else:
                start = started[-1] + 1
            if crashes >= MAX_CRASHES:
                break
            if start >= phase_end and phase_end < total:  # the default did not run: write the others
                written += _write(folder, feed, range(phase_end, total))
                phase_end = total
            if start >= len(written):
                break
    return None, failures


def _write(folder: Path, feed, indices) -> list[str]:
    paths = []
    for i in indices:
        path = folder / f"trial{i}.npz"
        np.savez(path, **feed(i)[0])
        paths.append(str(path))
    return paths


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _job_models(folder: Path, models: list) -> list[dict]:
    """The child's view of each model: its path, and the folder of its external data when it is a
    graph held in memory (written here, into the private temp folder, without weights)."""
    entries = []
    for i, m in enumerate(models):
        if isinstance(m, tuple):
            proto, data_folder = m
            path = folder / f"reference{i}.onnx"
            if not path.exists():
                path.write_bytes(proto.SerializeToString())
            entries.append({"path": str(path), "external_folder": os.path.abspath(data_folder)})
        else:
            entries.append({"path": os.path.abspath(m)})  # the child runs in another folder
    return entries


def _run_child(folder: Path, models: list, trials: list[str], start: int, cancel: CancelToken | None):
    """Run the child once: (events it reported, exit status: negative when a signal killed it;
    None when it could not tell)."""
    run = start_child(TARGET, {"models": _job_models(folder, models), "trials": trials, "start": start})
    events: list[dict] = []
    deadline = time.monotonic() + TIMEOUT_SECONDS
    try:
        while (event := run.receive(cancel, max(0.0, deadline - time.monotonic()))) is not None:
            events.append(event)
    except Cancelled:
        raise
    except ChildDied as died:  # a crash in ORT's run: the last trial it started says which
        return events, died.returncode
    except (TimeoutError, OnnxportError):  # too long, or the child failed outside ORT's runs
        return [], None
    finally:
        run.close()
    return events, 0
