"""`deploy(model, target, out, request=...)`: one model made ready for where it runs, and checked.

Contract: the model (with its weights) gets the requested fixed or dynamic shapes (shapes.py),
then, for `ort-X.Y`, the opset and IR version that release reads (versions.py) and is written as
OUT.onnx; for `ort-mobile`, ONNX Runtime's ORT format OUT.ort plus
OUT-stem.required_operators_and_types.config beside it, and ORT's NNAPI/CoreML verdict (mobile.py).
The result lists what was converted and what was kept as it was.
Before anything is put in place, the artifact is loaded in ONNX Runtime and run on the source's
inputs (check.py); a refusal or a failed check raises `OnnxportError` and leaves nothing (the
files are staged in the destination folder and renamed in by util/atomic.py, the config first,
the model last). Returns a `DeployResult`: what was converted, what was not, the check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from onnxport.core.deploy.check import ArtifactCheck, check_artifact
from onnxport.core.deploy.mobile import (
    CONFIG_SUFFIX,
    DISABLED_OPTIMIZERS,
    mobile_usability,
    to_ort_format,
    usability_lines,
)
from onnxport.core.deploy.shapes import DYNAMIC, ShapeRequest, apply_shapes
from onnxport.core.deploy.targets import Target, parse_target
from onnxport.core.deploy.versions import fit_versions
from onnxport.core.evaluate import runtime
from onnxport.core.evaluate.compare import EXACT, LOSSY
from onnxport.core.export.staging import Staging
from onnxport.core.export.writer import check_destination
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.run_reads import model_reads
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.out_paths import check_output
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter

ONE_FILE_LIMIT = 1_800_000_000  # bytes of weights above which an .onnx keeps them in a data file


@dataclass
class DeployResult:
    target: str
    needs: str
    source: str
    written: list[str]
    converted: list[str]
    kept: list[str] = field(default_factory=list)
    usability: dict | None = None
    check: ArtifactCheck | None = None
    size_bytes: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"target": self.target, "needs": self.needs, "source": self.source, "written": self.written,
                "converted": self.converted, "kept": self.kept, "usability": self.usability,
                "check": self.check.to_dict() if self.check else None, "size_bytes": self.size_bytes,
                "seconds": round(self.seconds, 3)}

    def summary_lines(self) -> list[str]:
        lines = [f"wrote {' + '.join(self.written)} for {self.target} ({self.size_bytes:,} bytes, {self.seconds:.2f} s)"]
        lines += [f"converted: {c}" for c in self.converted]
        lines += [f"kept: {c}" for c in self.kept]
        if self.usability:
            lines += [f"ORT Mobile usability: {line}" for line in usability_lines(self.usability)]
        if self.check is not None:
            lines.append(self.check.line())
        return lines


def _out_checked(out: Path, target: Target) -> None:
    if out.suffix.lower() != target.suffix:
        raise OnnxportError(f"{target.name} writes a {target.suffix} file: give -o NAME{target.suffix}, not {out.name}")
    check_destination(out)


def _save(model: onnx.ModelProto, path: Path, data_name: str) -> None:
    if sum(len(t.raw_data) for t in model.graph.initializer) > ONE_FILE_LIMIT:
        onnx.save_model(model, str(path), save_as_external_data=True, location=data_name)
    else:
        onnx.save_model(model, str(path))


def deploy(model_path: str | Path, target: str | Target, out: str | Path, *, request: ShapeRequest | None = None,
           progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> DeployResult:
    """See the module docstring."""
    start = time.perf_counter()
    target = parse_target(target) if isinstance(target, str) else target
    model_path, out, request = Path(model_path), Path(out), request or ShapeRequest()
    report = Reporter(progress, cancel)
    _out_checked(out, target)
    report(0.0, f"reading {model_path.name}")
    model = load_graph(model_path)
    reads = model_reads(model_path, model)  # never written over: the model, its external data
    for written in (out, out.with_name(out.stem + CONFIG_SUFFIX)) if target.mobile else (out,):
        check_output(written, reads)
    runtime.load_weights(model, model_path.parent)
    report.check()
    converted, kept = [], []
    model, notes = apply_shapes(model, request)
    converted += notes
    if not request:
        kept.append("input shapes kept as they are (no --shape / --dim)")
    if target.mobile:
        kept.append("opset and IR version kept: the .ort format is the installed ONNX Runtime's")
    else:
        report(0.1, f"fitting {model_path.name} to {target.name}")
        model, notes = fit_versions(model, target)
        converted += [n for n in notes if " kept" not in n]
        kept += [n for n in notes if " kept" in n]
    report.check()
    precision = runtime.precision_of(model)
    # float conversions change nothing ORT computes; fixed shapes or other op versions may let its
    # optimizer fuse otherwise (an .onnx is also compared with optimizations off)
    changed = bool(request.shapes or request.fixed_sizes()) or any(n.startswith("opset") for n in converted)
    thresholds = LOSSY if precision != "float32" else (EXACT if changed else None)
    stage = Staging(out)
    with stage:
        staged = stage.path(out.stem + ".onnx")
        _save(model, staged, stage.data_name)
        del model
        usability = None
        artifact = staged
        if target.mobile:
            report(0.25, "converting to ORT format (ONNX Runtime's convert_onnx_models_to_ort)")
            artifact, config = to_ort_format(staged, stage.dir)
            report.check()
            report(0.5, "ORT's mobile usability check")
            usability = mobile_usability(staged, stage.dir)
            converted.append(f"ORT format written by ONNX Runtime's convert_onnx_models_to_ort; "
                             f"operator config {out.stem + CONFIG_SUFFIX} with type reduction")
        report.check()
        report(0.6, f"checking {out.name} against {model_path.name}")
        also_batch = any(v == DYNAMIC for v in request.dims.values())
        check = check_artifact(model_path, artifact, staged, thresholds=thresholds, also_batch=also_batch, cancel=cancel,
                               plain=not target.mobile,
                               disabled=DISABLED_OPTIMIZERS if target.mobile else None)
        if not check.passed:
            raise OnnxportError(f"{out.name} does not match {model_path.name}: {check.reason}; nothing was written")
        report.check()
        report.commit()
        if target.mobile:
            config_out = out.with_name(out.stem + CONFIG_SUFFIX)
            written = [out, config_out]
            size = artifact.stat().st_size
            stage.commit_files([(config, config_out), (artifact, out)])
        else:
            written = stage.commit(staged, report=None)
            size = sum(p.stat().st_size for p in written)
    report.finished(f"wrote {out.name}")
    return DeployResult(target.name, target.needs(), str(model_path), [str(p) for p in written], converted,
                        kept, usability, check, size, time.perf_counter() - start)
