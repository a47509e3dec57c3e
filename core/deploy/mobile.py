"""ORT Mobile: the `.ort` file, the operator config of a reduced build, and ORT's usability verdict.

Contract: `to_ort_format(model_path, work)` runs ONNX Runtime's own
`convert_onnx_models_to_ort` in-process (optimization style Fixed, type reduction on: what
`python -m onnxruntime.tools.convert_onnx_models_to_ort --enable_type_reduction` writes) into
`work` and returns (`<stem>.ort`, `<stem>.required_operators_and_types.config`); its printed log
is kept off stdout; a model ORT cannot convert is one `OnnxportError` line.
`mobile_usability(model_path, work)` is ORT's check_onnx_model_mobile_usability verdict (its
usability_checker on the model optimized to the basic level) per execution provider (NNAPI,
CoreML NeuralNetwork, CoreML MLProgram): YES / MAYBE / NO, partitions, nodes covered, the ops it
cannot take, and the verdict with fixed input shapes where those are dynamic.
"""

from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path

import onnx

from onnxport.core.evaluate.runtime import ort_reason
from onnxport.core.util.errors import OnnxportError

CONFIG_SUFFIX = ".required_operators_and_types.config"
# what the converter leaves out off ARM/x64 targets (a device-specific layout); the check runs the
# source without it too, so a match is exact
DISABLED_OPTIMIZERS = ["NchwcTransformer"]
_COREML_NN = "coreml_supported_neuralnetwork_ops.md"
_COREML_ML = "coreml_supported_mlprogram_ops.md"


def to_ort_format(model_path: Path, work: Path) -> tuple[Path, Path]:
    """See the module docstring."""
    import onnxruntime
    from onnxruntime.tools.convert_onnx_models_to_ort import OptimizationStyle, convert_onnx_models_to_ort

    onnxruntime.set_default_logger_severity(3)  # its sessions would log optimizer warnings on stderr
    logging.getLogger("ort_format_model.utils").setLevel(logging.WARNING)  # "Created config in ..." on stderr
    out = work / "ort"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            convert_onnx_models_to_ort(model_path, output_dir=out, optimization_styles=[OptimizationStyle.Fixed],
                                       enable_type_reduction=True)
    except Exception as exc:  # noqa: BLE001 - ORT raises Fail/InvalidGraph/NotImplemented...
        raise OnnxportError(f"ONNX Runtime cannot convert {model_path.name} to ORT format: "
                            f"{ort_reason(exc)}") from None
    ort_file, config = out / (model_path.stem + ".ort"), out / (model_path.stem + CONFIG_SUFFIX)
    if not ort_file.is_file() or not config.is_file():
        raise OnnxportError(f"ONNX Runtime wrote no ORT format model for {model_path.name}")
    return ort_file, config


def _verdict(info) -> dict:
    nodes = max(info.num_nodes, 1)
    return {"suitability": info.suitability().name if info.num_nodes else "NO",
            "partitions": info.num_partitions, "supported_nodes": info.num_supported_nodes,
            "nodes": info.num_nodes, "covered": round(100.0 * info.num_supported_nodes / nodes, 1),
            "unsupported_ops": sorted(info.unsupported_ops),
            "dynamic_shape_nodes": info.nodes_unsupported_due_to_dynamic_input}


def mobile_usability(model_path: Path, work: Path) -> dict:
    """See the module docstring: {"NNAPI": {...}, "CoreML NeuralNetwork": {...}, ...}."""
    from onnxruntime.tools.mobile_helpers import usability_checker as uc
    from onnxruntime.tools.onnx_model_utils import optimize_model

    basic = work / "usability" / model_path.name
    basic.parent.mkdir()
    optimize_model(model_path, basic, use_external_initializers=True)
    model = onnx.shape_inference.infer_shapes(onnx.load(str(basic)), strict_mode=False)
    quiet = logging.getLogger("onnxport.deploy.usability")
    quiet.setLevel(logging.ERROR)
    dynamic, _count = uc.check_shapes(model.graph, quiet)
    checkers = {"NNAPI": uc.check_nnapi_partitions,
                "CoreML NeuralNetwork": lambda m, fixed: uc.check_coreml_partitions(m, fixed, _COREML_NN),
                "CoreML MLProgram": lambda m, fixed: uc.check_coreml_partitions(m, fixed, _COREML_ML)}
    verdicts = {}
    for ep, check in checkers.items():
        verdict = _verdict(check(model, True))
        if verdict["suitability"] != "YES" and dynamic:
            verdict["with_fixed_shapes"] = _verdict(check(model, False))["suitability"]
        verdicts[ep] = verdict
    return verdicts


def usability_lines(verdicts: dict) -> list[str]:
    lines = []
    for ep, v in verdicts.items():
        text = (f"{ep}: {v['suitability']} ({v['partitions']} partition(s), {v['supported_nodes']}/{v['nodes']} nodes, "
                f"{v['covered']}%)")
        if v["unsupported_ops"]:
            text += f"; cannot take {', '.join(v['unsupported_ops'][:8])}" + ("..." if len(v["unsupported_ops"]) > 8 else "")
        if "with_fixed_shapes" in v:
            text += f"; with fixed input shapes: {v['with_fixed_shapes']}"
        lines.append(text)
    return lines
