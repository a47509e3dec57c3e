"""One quantization job per process, timed from the process's start, its peak memory its own.

    PYTHON bench/peer_jobs.py JOB FP32 OUT [OPTION]

Run by bench/quant_real.py, each job in a fresh interpreter (imports included, as a user's run of
the tool): `optimum` (Optimum's ORTQuantizer, in .venv-peers; OPTION an AutoQuantizationConfig
preset with `_pc` for per-channel, e.g. `avx512_vnni_pc`), `ort` (onnxruntime's quantize_dynamic,
OPTION `pc` for per-channel), `onnxport` (onnxport's `quantize`, dynamic, its default target and
bundled sentences; OPTION the int8 path, `auto` or e.g. `avx2`; the tokenizer folder in
ONNXPORT_TOKENIZER). Prints one JSON line: seconds (process start to the file written, verdict
included), api_seconds (the quantize call alone), cpu_seconds (user + system, every thread: what
other load on the machine changes least), peak_rss_mb, path. Imports nothing of onnxport
at module level: the peers' environment does not have it.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path


def _since_start() -> float:
    """Seconds since this process started (its interpreter start-up and imports included)."""
    ticks = os.sysconf("SC_CLK_TCK")
    started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - started


Job = Callable[[], dict]


def optimum(fp32: Path, out: Path, option: str) -> Job:
    from optimum.onnxruntime import ORTQuantizer
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    def job() -> dict:
        preset, per_channel = option.removesuffix("_pc"), option.endswith("_pc")
        config = getattr(AutoQuantizationConfig, preset)(is_static=False, per_channel=per_channel)
        quantizer = ORTQuantizer.from_pretrained(fp32.parent, file_name=fp32.name)
        quantizer.quantize(save_dir=out.parent, quantization_config=config, file_suffix=out.stem)
        (out.parent / f"{fp32.stem}_{out.stem}.onnx").replace(out)
        return {"config": str(config)}

    return job


def ort(fp32: Path, out: Path, option: str) -> Job:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def job() -> dict:
        quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8, per_channel=option == "pc",
                         extra_options={"MatMulConstBOnly": True})
        return {}

    return job


def onnxport(fp32: Path, out: Path, option: str) -> Job:
    from onnxport.core.quantize.quantize import QuantizeOptions, quantize

    def job() -> dict:
        result = quantize(fp32, out, "dynamic", QuantizeOptions(int8_path=None if option == "auto" else option,
                                                                tokenizer=os.environ.get("ONNXPORT_TOKENIZER")))
        worst = min(result.validation.outputs, key=lambda o: o.cosine)
        return {"kept_float_nodes": result.kept_float_nodes, "search": result.search,
                "int8_path": result.int8_path, "attempts": result.attempts, "notes": result.notes,
                "verdict": {"inputs": result.validation.inputs, "cosine": worst.cosine,
                            "per_sample": worst.samples, "passed": result.validation.passed}}

    return job


def onnxport_int4(fp32: Path, out: Path, option: str) -> Job:
    """onnxport's int4; OPTION `key=value` pairs joined by `,`: block (32), method (auto), target
    (a cosine or `none`), ops (`+`-joined op types; default MatMul and Gather); the tokenizer folder
    in ONNXPORT_TOKENIZER, calibration data (an .npz) in ONNXPORT_CALIBRATION when set."""
    from onnxport.core.quantize.quantize import QuantizeOptions, quantize

    def job() -> dict:
        asked = dict(part.split("=") for part in option.split(",") if part)
        target = asked.get("target", "0.99")
        options = QuantizeOptions(block_size=int(asked.get("block", 32)), int4_method=asked.get("method", "auto"),
                                  accuracy_target=None if target == "none" else float(target),
                                  op_types=asked["ops"].split("+") if "ops" in asked else None,
                                  calibration=os.environ.get("ONNXPORT_CALIBRATION"),
                                  tokenizer=os.environ.get("ONNXPORT_TOKENIZER"))
        result = quantize(fp32, out, "int4", options)
        worst = min(result.validation.outputs, key=lambda o: o.cosine)
        return {"kept_float_nodes": result.kept_float_nodes, "search": result.search, "notes": result.notes,
                "bits": result.options.get("bits"), "attempts": result.attempts,
                "verdict": {"inputs": result.validation.inputs, "cosine": worst.cosine,
                            "passed": result.validation.passed}}

    return job


def _calibration_reader(path: Path):
    """ORT's CalibrationDataReader over the rows of an .npz (one sentence per call, as GPTQ takes them)."""
    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader

    class Rows(CalibrationDataReader):
        def __init__(self) -> None:
            data = np.load(path)
            self.rows = [{k: data[k][i:i + 1] for k in data.files} for i in range(len(data[data.files[0]]))]
            self.at = 0

        def get_next(self):
            self.at += 1
            return self.rows[self.at - 1] if self.at <= len(self.rows) else None

    return Rows()


def ort_int4(fp32: Path, out: Path, option: str) -> Job:
    """ORT's MatMulNBitsQuantizer; OPTION `ALGO-BLOCK` (default, rtn, hqq, gptq; e.g. `hqq-32`), GPTQ's
    calibration rows from the .npz in ONNXPORT_CALIBRATION. Its defaults otherwise (asymmetric,
    accuracy_level unset)."""
    import logging

    logging.getLogger().addHandler(logging.NullHandler())  # its import calls basicConfig(INFO)
    from onnxruntime.quantization import matmul_nbits_quantizer as nbits

    def job() -> dict:
        algo, block = option.split("-")
        size = int(block)
        config = {"default": lambda: nbits.DefaultWeightOnlyQuantConfig(block_size=size),
                  "rtn": lambda: nbits.RTNWeightOnlyQuantConfig(),
                  "hqq": lambda: nbits.HQQWeightOnlyQuantConfig(block_size=size),
                  "gptq": lambda: nbits.GPTQWeightOnlyQuantConfig(
                      calibration_data_reader=_calibration_reader(Path(os.environ["ONNXPORT_CALIBRATION"])),
                      block_size=size)}[algo]()
        quantizer = nbits.MatMulNBitsQuantizer(str(fp32), block_size=size, algo_config=config)
        quantizer.process()
        quantizer.model.save_model_to_file(str(out), False)
        return {}

    return job


JOBS = {"optimum": optimum, "ort": ort, "onnxport": onnxport, "ort_int4": ort_int4,
        "onnxport_int4": onnxport_int4}


def main(argv: list[str]) -> int:
    job, fp32, out = argv[0], Path(argv[1]), Path(argv[2])
    option = argv[3] if len(argv) > 3 else ""
    run = JOBS[job](fp32, out, option)
    started = time.perf_counter()
    extra = run()
    api = time.perf_counter() - started
    use = resource.getrusage(resource.RUSAGE_SELF)
    line = json.dumps({"job": job, "option": option, "seconds": _since_start(), "api_seconds": api,
                       "cpu_seconds": use.ru_utime + use.ru_stime, "peak_rss_mb": use.ru_maxrss / 1024,
                       "path": str(out), **extra}, default=str)
    print(f"\n{line}")  # on a line of its own: ORT's RTN leaves its progress bar without a newline
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
