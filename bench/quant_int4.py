"""Weight-only int4 of the real all-MiniLM-L6-v2 (issue 40) against ONNX Runtime's int4 quantizers.

Runs after bench/quant_real.py (its float32 export, unseen sentences and latency inputs). The peers
quantize the model ORT's `quant_pre_process` made (not timed): `MatMulNBitsQuantizer` with its
DEFAULT, RTN, HQQ and GPTQ configs (GPTQ calibrated on 32 of onnxport's bundled sentences, none
of which is scored) at blocks 32 and 128. onnxport quantizes the float32 model itself (its
pre-processing and held-out verdict timed): `--no-target`, MatMuls only (as the peers) at both
blocks, without data (HQQ-style) and with GPTQ's calibration rows (GPTQ-style); then, with its default target (0.99) and every candidate (MatMuls and embeddings), the
mixed 4/8-bit/float model. Each job runs once in its own process (bench/peer_jobs.py). Measured:
size vs float32, min cosine on the unseen sentences, p50 latency vs DEFAULT's at the same block
(alternating, 1 thread, 128 tokens). Bars (issue 40), per block: min cosine >= the best peer's at
<= its size, latency <= 1.05x DEFAULT's, time <= 1.5x the fastest peer's; the target's model
meets it and is smaller than dynamic int8's (0.254x).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from bench import quant_real

BARS = {"latency_vs_default": 1.05, "time_vs_fastest": 1.5, "dynamic_int8_size": 0.254}
BLOCKS = (32, 128)
PEER_ALGOS = ("default", "rtn", "hqq", "gptq")
CALIBRATION_SENTENCES = 32


def _prepare(real: Path, work: Path) -> tuple[Path, Path]:
    """ORT's pre-processed model (the peers' input) and the GPTQ calibration rows (bundled sentences)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from onnxport.core.quantize.held_out import TEXT_FILE

    logging.getLogger().addHandler(logging.NullHandler())
    pre = work / "pre.onnx"
    quant_pre_process(str(real / "model.onnx"), str(pre), skip_symbolic_shape=True)  # its symbolic pass fails here
    lines = [t.strip() for t in TEXT_FILE.read_text(encoding="utf-8").splitlines() if t.strip()]
    calibration = quant_real.tokenize(quant_real.minilm_folder(), lines[:CALIBRATION_SENTENCES], work / "calib.npz")
    return pre, calibration


def _plan(real: Path, pre: Path, calibration: Path, tokenizer: Path) -> list[tuple[str, str, Path, str, dict]]:
    """(row, job, input model, option, environment) of every job."""
    plan = [(f"ort_{a}_{b}", "ort_int4", pre, f"{a}-{b}", {"ONNXPORT_CALIBRATION": str(calibration)})
            for b in BLOCKS for a in PEER_ALGOS]
    env = {"ONNXPORT_TOKENIZER": str(tokenizer)}
    plan += [(f"onnxport_{b}", "onnxport_int4", real / "model.onnx", f"block={b},target=none,ops=MatMul", env)
             for b in BLOCKS]
    plan += [(f"onnxport_gptq_{b}", "onnxport_int4", real / "model.onnx", f"block={b},target=none,ops=MatMul",
              {**env, "ONNXPORT_CALIBRATION": str(calibration)}) for b in BLOCKS]  # the data ORT's GPTQ gets
    plan.append(("onnxport_target", "onnxport_int4", real / "model.onnx", "block=32", env))
    return plan


def run(real: Path, work: Path, seconds: float, threads: int, dynamic_size: float | None = None) -> dict:
    """`real`: quant_real's folder; `dynamic_size`: the size of its dynamic int8 model, when it ran."""
    from onnxport.core.evaluate.runtime import model_size
    from onnxport.core.evaluate.validate import validate

    if not (real / "model.onnx").is_file():
        return {"skipped": "no MiniLM export (the real section did not run)"}
    pre, calibration = _prepare(real, work)
    fp32 = real / "model.onnx"
    rows: dict[str, dict] = {}
    for key, kind, src, option, env in _plan(real, pre, calibration, quant_real.minilm_folder()):
        out = work / f"{key}.onnx"
        got = quant_real.job(Path(sys.executable), kind, src, out, option, env)
        rows[key] = got
        if "failed" in got:
            continue
        check = validate(out, fp32, inputs=real / "unseen.npz", layers=False)
        got.update(size_ratio=model_size(out) / model_size(fp32), min_cosine=check.min_cosine)
        print(f"{key}: {got['seconds']:.1f} s ({got['cpu_seconds']:.1f} s CPU), {got['peak_rss_mb']:.0f} MB, "
              f"{got['size_ratio']:.3f}x, min cosine {check.min_cosine:.4f}", flush=True)
    _latencies(rows, work, real / "b1.npz", seconds, threads)
    return {"rows": rows, "threads": threads, "dynamic_int8_size": dynamic_size,
            "inputs": {"unseen": "quant_real's unseen sentences", "latency": "1 x 128 tokens"}}


def _latencies(rows: dict, work: Path, inputs: Path, seconds: float, threads: int) -> None:
    """Each onnxport row's p50 latency against ORT DEFAULT's at its block (alternating rounds)."""
    from onnxport.core.evaluate.benchmark import benchmark

    for key, r in rows.items():
        if "size_ratio" not in r or not key.startswith("onnxport"):
            continue
        block = 32 if key == "onnxport_target" else int(key.rsplit("_", 1)[1])
        default = work / f"ort_default_{block}.onnx"
        if "size_ratio" not in rows.get(f"ort_default_{block}", {}):
            continue
        bench = benchmark([default, Path(r["path"])], inputs=inputs, seconds=seconds, threads=threads)
        r["latency_vs_default"] = bench.latency_ratio
        r["p50_ms"] = bench.models[1].p50_ms
        r["default_p50_ms"] = bench.models[0].p50_ms


def bars(data: dict) -> dict[str, bool]:
    rows, verdicts = data["rows"], {}
    for key in [k for b in BLOCKS for k in (f"onnxport_{b}", f"onnxport_gptq_{b}")]:
        b = int(key.rsplit("_", 1)[1])
        ours = rows.get(key, {})
        peers = {k: r for k, r in rows.items() if k.startswith("ort_") and k.endswith(f"_{b}") and "size_ratio" in r}
        if "size_ratio" not in ours or not peers:
            verdicts[f"{key}: it and the peers ran"] = False
            continue
        best = max(peers, key=lambda k: peers[k]["min_cosine"])
        verdicts[f"{key}: min cosine >= the best peer's ({best})"] = (
            ours["min_cosine"] >= peers[best]["min_cosine"])
        verdicts[f"{key}: size <= {best}'s"] = ours["size_ratio"] <= peers[best]["size_ratio"]
        if "latency_vs_default" in ours:
            verdicts[f"{key}: latency <= {BARS['latency_vs_default']}x DEFAULT's"] = (
                ours["latency_vs_default"] <= BARS["latency_vs_default"])
        fastest = min(r["seconds"] for r in peers.values())
        verdicts[f"{key}: time <= {BARS['time_vs_fastest']}x the fastest peer's"] = (
            ours["seconds"] <= BARS["time_vs_fastest"] * fastest)
    target = rows.get("onnxport_target", {})
    verdicts["default target: a model written that meets it"] = bool(target.get("verdict", {}).get("passed"))
    limit = data.get("dynamic_int8_size") or BARS["dynamic_int8_size"]
    verdicts[f"default target: smaller than dynamic int8 ({limit:.3f}x)"] = target.get("size_ratio", 1.0) < limit
    return verdicts


def table(data: dict) -> str:
    lines = [("", "time s (CPU s)", "peak MB", "size x", "min cosine", "b1 vs DEFAULT", "bits 4/8/float")]
    for key, r in data["rows"].items():
        if "size_ratio" not in r:
            lines.append((key, r.get("failed", "not measured")[:60], "", "", "", "", ""))
            continue
        lat = f"{r['latency_vs_default']:.3f}" if "latency_vs_default" in r else "-"
        bits = r.get("bits") or {}
        mix = "/".join(str(sum(v == b for v in bits.values())) for b in (4, 8, 0)) if bits else "-"
        lines.append((key, f"{r['seconds']:.1f} ({r['cpu_seconds']:.1f})", f"{r['peak_rss_mb']:.0f}",
                      f"{r['size_ratio']:.3f}", f"{r['min_cosine']:.4f}", lat, mix))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines)


def main(argv: list[str]) -> int:
    """`python -m bench.quant_int4 REAL WORK`: this section alone on an earlier run's REAL folder."""
    import json

    real, work = Path(argv[0]), Path(argv[1])
    work.mkdir(parents=True, exist_ok=True)
    data = run(real, work, 3.0, 1)
    print(table(data))
    data["bars"] = bars(data)
    for name, ok in data["bars"].items():
        print(f"  {'ok  ' if ok else 'MISS'} {name}")
    (work / "quant_int4.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    return 0 if all(data["bars"].values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
