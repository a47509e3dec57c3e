"""The child's side of running a model on another ONNX Runtime build: targets of the one child protocol.

Runs in that build's environment, where onnxport is not installed (util/child_main.py loads this
file by path), so it imports only the standard library, numpy and onnxruntime (Python >= 3.8).
- `describe`: this environment's Python, ONNX Runtime version and package, its providers.
- `open_model`: a session of a model on one provider; the seconds it took to load; where ONNX
  Runtime put the nodes (`placement`, from its own verbose placement log); the nodes each provider
  ran (its profile of the first run); the outputs on the feeds given (npz bytes).
- `time_runs`: `repeat` runs of the open session on the first feed, timed here (the protocol's
  round trip is not counted). `close_model` drops the session.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
import tempfile
import time

CPU = "CPUExecutionProvider"
COPIES = ("MemcpyFromHost", "MemcpyToHost")  # placed on a device provider by ORT: not the model's nodes
PLACED = re.compile(r"(All nodes|Node\(s\)) placed on \[(\w+)\]\. Number of nodes: (\d+)")
LISTED = re.compile(r"(\S+) \((.*?)\)(?:, |$)")
LOG_LIMIT = 64 << 20  # of ORT's log per session, the end kept (its placement comes last)
_open: dict = {}  # the one open session of this process: its session and first feed


def describe(request, data, channel) -> dict:
    """What this environment runs: {"python", "python_version", "ort_version", "package", "providers"}."""
    import onnxruntime as ort

    return {"python": sys.executable, "python_version": ".".join(map(str, sys.version_info[:3])),
            "ort_version": ort.__version__, "package": _package(), "providers": ort.get_available_providers(),
            "cpu_flags": cpu_flags()}


def _package() -> str | None:
    """The distribution that installed `onnxruntime` here (onnxruntime, onnxruntime-openvino, -gpu...)."""
    from importlib import metadata

    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("onnxruntime") and "training" not in name and any(
                str(f).startswith("onnxruntime/") for f in (dist.files or ())[:50]):
            return name
    return None


def cpu_flags() -> list[str]:
    """The reduced-precision CPU features that decide what some providers compute in (Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return []
    return sorted(set(flags) & {"amx_bf16", "amx_fp16", "avx512_bf16", "avx512_fp16", "avx512_vnni"})


def parse_placement(log: str) -> list[dict]:
    """The "Node placements" blocks of ORT's verbose log (one per graph: the main one, then each
    control-flow body): [{provider: {"count", "nodes": [(op_type, name), ...]}}]. ORT lists the
    nodes only when a graph's nodes went to more than one provider."""
    blocks, current, last = [], None, None
    for line in log.splitlines():
        if "Node placements" in line:
            current = {}
            blocks.append(current)
            continue
        found = PLACED.search(line)
        if found and current is not None:
            last = found.group(2)
            current[last] = {"count": int(found.group(3)), "nodes": []}
            continue
        if current is not None and last is not None and "VerifyEachNodeIsAssignedToAnEp]   " in line:
            text = line.split("VerifyEachNodeIsAssignedToAnEp]", 1)[1].strip()
            current[last]["nodes"] += [(op, name) for op, name in LISTED.findall(text)]
    return blocks


def placed_counts(blocks: list[dict]) -> dict:
    """{provider: nodes} over every block, ORT's copy nodes left out where it listed them."""
    counts: dict = {}
    for block in blocks:
        for provider, placed in block.items():
            copies = sum(1 for op, _ in placed["nodes"] if op in COPIES)
            counts[provider] = counts.get(provider, 0) + placed["count"] - copies
    return counts


def cpu_nodes(blocks: list[dict]) -> list[str]:
    """The names of the nodes placed on CPU in graphs shared with another provider."""
    return [name for block in blocks if len(block) > 1
            for op, name in block.get(CPU, {}).get("nodes", []) if op not in COPIES]


class _StderrLog:
    """What ORT's C++ log writes to this process's stderr while the block runs. The protocol's
    caller gives a child a regular file as stderr (util/child_call.py), read back here by offset;
    elsewhere (a terminal, a pipe) the text is empty."""

    def __enter__(self) -> _StderrLog:
        sys.stderr.flush()
        self.start, self.text = self._size(), ""
        return self

    def __exit__(self, *exc_info) -> None:
        end = self._size()
        if self.start is not None and end is not None and end > self.start:
            start = max(self.start, end - LOG_LIMIT)
            self.text = os.pread(2, end - start, start).decode("utf-8", "replace")

    @staticmethod
    def _size() -> int | None:
        try:
            info = os.fstat(2)
        except OSError:
            return None
        return info.st_size if stat.S_ISREG(info.st_mode) else None


def _options(ort, *, verbose: bool = False, basic: bool = False, threads: int | None = None):
    so = ort.SessionOptions()
    so.log_severity_level = 0 if verbose else 2
    so.log_verbosity_level = 0
    if basic:  # the graph ORT partitions: its provider-independent optimisations only
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    if threads:
        so.intra_op_num_threads = int(threads)
    return so


def _session(ort, model: str, so, provider: str, options: dict):
    """(the session, ORT's log while it was made); a failure is `RuntimeError` with ORT's reason."""
    providers = [provider] if provider == CPU else [provider, CPU]
    provider_options = [options] if provider == CPU else [options, {}]
    try:
        with _StderrLog() as log:
            sess = ort.InferenceSession(model, so, providers=providers, provider_options=provider_options)
    except Exception as exc:  # noqa: BLE001 - ORT raises several types; the reason crosses as one line
        raise RuntimeError(clean(" ".join(str(exc).split())) or type(exc).__name__) from None
    return sess, log.text


class ProviderError(RuntimeError):
    """A provider that cannot run the model here: its message crosses as it is (one line)."""

    user_error = True


def why_not(log: str) -> str:
    """Why a provider did not start, from ORT's log: its first error, else its last warning ('' if
    neither), without the log's prefix, source paths and C++ signatures."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in log.splitlines()]
    errors = [ln for ln in lines if "[E:onnxruntime" in ln]
    warnings = [ln for ln in lines if "[W:onnxruntime" in ln]
    if not (errors or warnings):
        return ""
    return clean(re.sub(r"^.*?\] ", "", (errors or warnings[-1:])[0]))


def clean(text: str) -> str:
    """ORT's message without its boilerplate, source paths and C++ signatures (what is left says
    what is wrong)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    text = re.sub(r"\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"^\s*Load model from .*? failed:\s*", "", text)
    text = re.sub(r"\S+\.(?:cc|cpp|h):\d+ ", "", text)
    text = re.sub(r"(?:static |virtual )?(?:[\w:<>*&]+ )?[\w:<>]+::\w+\([^)]*\)(?: const)? ", "", text)
    return text.replace("[ERROR] ", "").strip()


def started(sess, provider: str, log: str) -> None:
    """`ProviderError` with ORT's reason when `provider` is not among the session's (ORT fell back to CPU)."""
    if provider not in sess.get_providers():
        reason = why_not(log)
        raise ProviderError(f"{provider} did not start here" + (f": {reason}" if reason else ""))


def placement(ort, model: str, provider: str, options: dict) -> dict:
    """The partitioned graph's nodes (after ORT's basic optimisations): how many, how many the
    provider took, and the ones that stayed on CPU (by name, for graphs ORT listed)."""
    _, log = _session(ort, model, _options(ort, verbose=True, basic=True), CPU, {})
    total = sum(placed_counts(parse_placement(log)).values())
    if provider == CPU:
        return {"partitioned": total, "on_provider": total, "on_cpu": 0, "cpu_nodes": []}
    sess, log = _session(ort, model, _options(ort, verbose=True, basic=True), provider, options)
    started(sess, provider, log)
    blocks = parse_placement(log)
    on_cpu = placed_counts(blocks).get(CPU, 0)
    return {"partitioned": total, "on_provider": max(total - on_cpu, 0), "on_cpu": on_cpu,
            "cpu_nodes": cpu_nodes(blocks)}


def ran_on(profile: str) -> dict:
    """{provider: nodes} of the nodes ORT's profile shows running (one profiled run)."""
    with open(profile) as f:
        events = json.load(f)
    seen: dict = {}
    for e in events:
        args = e.get("args") or {}
        name = e.get("name", "")
        if e.get("cat") == "Node" and args.get("provider") and name.endswith("_kernel_time"):
            seen.setdefault(args["provider"], set()).add(name[:-len("_kernel_time")])
    return {provider: len(names) for provider, names in seen.items()}


def _feeds(request: dict, data: bytes) -> list:
    import numpy as np

    arrays = np.load(io.BytesIO(data), allow_pickle=False)
    return [{name: arrays[f"f{i}_{j}"] for j, name in enumerate(request["inputs"])}
            for i in range(request["feeds"])]


def open_model(request: dict, data: bytes, channel) -> bytes:
    """See the module docstring. Request: model (absolute path), provider, options, inputs (names),
    feeds (how many in `data`), threads. Sends a JSON message, returns the outputs' npz bytes."""
    import numpy as np
    import onnxruntime as ort

    _open.clear()
    provider, options, model = request["provider"], request.get("options") or {}, request["model"]
    if provider not in ort.get_available_providers():
        raise ProviderError(f"ONNX Runtime {ort.__version__} here has no {provider}")
    feeds = _feeds(request, data)
    with tempfile.TemporaryDirectory(prefix="onnxport-probe-") as folder:
        channel.progress(None, f"{provider}: placing nodes")
        try:
            placed = placement(ort, model, provider, options)
        except ProviderError:
            raise
        except RuntimeError as exc:
            raise ProviderError(f"ONNX Runtime {ort.__version__} cannot load this model: {exc}") from None
        channel.progress(None, f"{provider}: loading")
        so = _options(ort, threads=request.get("threads"))
        so.enable_profiling, so.profile_file_prefix = True, os.path.join(folder, "profile")
        t0 = time.perf_counter()
        sess, log = _session(ort, model, so, provider, options)
        load_s = time.perf_counter() - t0
        started(sess, provider, log)
        channel.progress(None, f"{provider}: running")
        outputs = [sess.run(None, feed) for feed in feeds[:1]]
        ran = ran_on(sess.end_profiling())
        outputs += [sess.run(None, feed) for feed in feeds[1:]]
    _open.update(session=sess, feed=feeds[0])
    channel.send({"load_s": load_s, "placement": placed, "ran": ran,
                  "outputs": [o.name for o in sess.get_outputs()],
                  "options": sess.get_provider_options().get(provider, {})})
    buffer = io.BytesIO()
    np.savez(buffer, **{f"o{i}_{k}": np.asarray(v) for i, out in enumerate(outputs) for k, v in enumerate(out)})
    return buffer.getvalue()


def time_runs(request: dict, data: bytes, channel) -> float:
    """Seconds of `repeat` runs of the open session on its first feed."""
    sess, feed = _open["session"], _open["feed"]
    t0 = time.perf_counter()
    for _ in range(int(request["repeat"])):
        sess.run(None, feed)
    return time.perf_counter() - t0


def close_model(request, data, channel) -> None:
    _open.clear()
