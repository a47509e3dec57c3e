"""Dynamic int8 of transformers: a real pretrained one, and a BERT-style encoder vs ORT's own export.

    python -m bench quant_bench [--real | --synthetic] [--layers 6] [--hidden 384] [--seq 128] [--seconds 3]

Two cases (both by default):
- real (`--real`, bench/quant_real.py): all-MiniLM-L6-v2 exported in training mode, onnxport's
  export, dynamic int8 against Optimum and ORT per-channel, each quantizer in its own process; bars
  cosine >= 0.99 on unseen sentences, size <= 0.27x, latency <= 1.05x ORT per-channel's (b1, b8),
  time <= 1.0x Optimum's fastest row, for this CPU's int8 path and for the AVX2 path;
- int4 (with `--real`, bench/quant_int4.py): MiniLM weight-only int4 against ORT's
  MatMulNBitsQuantizer (DEFAULT, RTN, HQQ, GPTQ) at blocks 32 and 128, and the default target's mix;
- real CNN (with `--real`, bench/quant_cnn.py): static QDQ of PP-OCRv4's text detector on rendered
  pages against ORT's quantize_static (bars: cosine and text-mask agreement >= 0.99 on held-out
  pages, size <= 0.6x, latency <= 0.85x, time <= 1.0x ORT's);
- float16 (with `--real`, bench/quant_fp16.py): both models against onnxconverter-common's
  converter (bars: onnxport's checked result at cosine >= 0.99 on every model, the peer's shown
  beside it; onnxport's conversion itself <= 2x the peer's load + convert + save);
- synthetic (`--synthetic`, below):

A random BERT (transformers `BertConfig`, no download) is given trained-looking weights (weights
wider than a fresh init, and a few outlier hidden dimensions in every LayerNorm, as trained BERTs
have), exported the way seed 002 says (`torch.onnx.export(dynamo=False,
training=TrainingMode.TRAINING, do_constant_folding=False, export_params=True)`), and turned into
ORT training artifacts (eval graph + checkpoint). Then:
- onnxport: `export_model` (eval graph + checkpoint -> float32 inference model), then
  `quantize(..., "dynamic")` with its default accuracy target (cosine >= 0.99 per output);
- reference: ORT's `Module.export_model_for_inferencing` and plain `quantize_dynamic` on it.
ORT's training API (artifacts, its export) runs in the training environment (onnxruntime-training
1.19.2, see `onnxport.core.training`). Without one, onnxport exports the forward graph itself (its
weights are initializers) and the reference row says "n/a (no training environment)".
- onnxport again with a tighter target (`--strict`, cosine >= 0.999): the accuracy-target loop
  keeps the most sensitive nodes in float; which ones is printed.
Measured in this run: size, latency (p50/p90, alternating rounds, 1 thread, batch 1) and cosine
of the pooled output on held-out inputs (padded token ids), each int8 model against its float32
model. Bars (DESIGN.md): onnxport int8 <= 0.4x the float32 size, latency ratio < 1, cosine >= 0.99.
Writes build/bench/quant_bench.json ({"real": ..., "synthetic": ...}); exit 1 if a bar is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from bench import quant_cnn, quant_fp16, quant_int4, quant_real

OUT = Path("build/bench")
NO_TRAINING = "n/a (no training environment)"
OUTPUTS = ["pooler_output", "last_hidden_state"]
POOLED = "pooler_output"
BARS = {"size_ratio": 0.4, "latency_ratio": 1.0, "min_cosine": 0.99}


def build_bert(layers: int, hidden: int, vocab: int, seq: int, outlier: float = 12.0,
               ffn_outlier: float = 0.0, seed: int = 0):
    """A BertModel with trained-looking weights (see the module docstring)."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=max(hidden // 64, 1), intermediate_size=4 * hidden,
                        max_position_embeddings=max(seq, 128), initializer_range=0.05,
                        attn_implementation="eager")
    model = BertModel(config)
    rng = np.random.default_rng(seed)
    outliers = rng.choice(hidden, size=2, replace=False)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(torch.from_numpy((1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)))
                p[outliers] = outlier
            elif "LayerNorm.bias" in name:
                p.copy_(torch.from_numpy((0.1 * rng.standard_normal(hidden)).astype(np.float32)))
                p[outliers] = outlier / 3
            elif name.endswith(".bias"):
                p.copy_(torch.from_numpy((0.05 * rng.standard_normal(p.shape)).astype(np.float32)))
        for layer in model.encoder.layer:  # a few huge FFN activations, as trained transformers have
            channels = torch.from_numpy(rng.choice(4 * hidden, size=2, replace=False))
            layer.intermediate.dense.bias[channels] = ffn_outlier
            layer.output.dense.weight[:, channels] *= 0.1
    model.train()
    return model


def export_training_mode(model, path: Path, seq: int) -> None:
    import torch

    class Encoder(torch.nn.Module):  # BertModel.forward's positional order varies across versions
        def __init__(self, bert) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
            return out.last_hidden_state, out.pooler_output

    ids = torch.randint(0, model.config.vocab_size, (2, seq))
    mask = torch.ones(2, seq, dtype=torch.int64)
    model = Encoder(model).train()
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids, mask), str(path), dynamo=False, export_params=True, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state", "pooler_output"], dynamic_axes=axes, opset_version=17)


def artifacts_and_ort_export(forward: Path, work: Path) -> tuple[Path, Path] | None:
    """ORT training artifacts of `forward` and ORT's own export of them, in the training environment:
    (eval graph + checkpoint folder, ORT's float32 inference model); None without that environment."""
    from onnxport.core.training.artifacts import generate_training_artifacts
    from onnxport.core.training.environment import find_training_python
    from onnxport.core.training.process import TrainingProcess
    from tests.support.ort_api import TrainingFiles, ort_export

    if find_training_python() is None:
        return None
    with TrainingProcess() as training:
        artifacts = generate_training_artifacts(forward, work / "artifacts", loss="mse", loss_input=POOLED,
                                                optimizer="adamw", training=training)
        files = TrainingFiles(artifacts.training_model, artifacts.optimizer_model, artifacts.eval_model)
        out = ort_export(training, files, artifacts.checkpoint, OUTPUTS, work / "ort_model.onnx")
    return artifacts.folder, out


def verdict_of(result) -> dict:
    """quantize's own verdict: the inputs it held out from its search, the cosine and its spread per sample."""
    v = result.validation
    worst = min(v.outputs, key=lambda o: o.cosine)
    return {"inputs": v.inputs, "cosine": worst.cosine, "per_sample": worst.samples, "search": result.search}


def held_out_inputs(path: Path, vocab: int, seq: int, batch: int = 8, seed: int = 123) -> Path:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000 if vocab > 2000 else 1, vocab, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    for row, length in enumerate(rng.integers(seq // 4, seq + 1, batch)):
        ids[row, 0] = 101 if vocab > 101 else 0
        mask[row, length:] = 0
        ids[row, length:] = 0
    np.savez(path, input_ids=ids, attention_mask=mask)
    return path


def bench_input(path: Path, held_out: Path) -> Path:
    data = np.load(held_out)
    np.savez(path, input_ids=data["input_ids"][:1], attention_mask=np.ones_like(data["attention_mask"][:1]))
    return path


def cosine_of(model: Path, reference: Path, inputs: Path) -> tuple[float, float]:
    from onnxport.core.evaluate.validate import validate

    report = validate(model, reference, inputs=inputs, layers=False)
    by_name = {o.name: o for o in report.outputs}
    return by_name[POOLED].cosine, report.min_cosine


def run(args: argparse.Namespace, work: Path) -> dict:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from onnxport.core.evaluate.benchmark import benchmark
    from onnxport.core.evaluate.runtime import model_size
    from onnxport.core.evaluate.validate import validate
    from onnxport.core.export.export import export_model
    from onnxport.core.io.checkpoint import read_checkpoint
    from onnxport.core.quantize.quantize import QuantizeOptions, quantize

    t0 = time.perf_counter()
    model = build_bert(args.layers, args.hidden, args.vocab, args.seq, args.outlier, args.ffn_outlier)
    forward = work / "forward.onnx"
    export_training_mode(model, forward, args.seq)
    del model
    ort = artifacts_and_ort_export(forward, work)
    if ort is None:  # onnxport's export of the forward graph itself (weights are its initializers)
        source, params, ort_fp32 = forward, None, None
        print(f"ORT reference: {NO_TRAINING}", flush=True)
    else:
        source, params, ort_fp32 = ort[0] / "eval_model.onnx", read_checkpoint(ort[0] / "checkpoint"), ort[1]
    print(f"built and exported a {args.layers}-layer BERT (hidden {args.hidden}, vocab {args.vocab}) "
          f"in {time.perf_counter() - t0:.0f} s", flush=True)
    held_out = held_out_inputs(work / "held_out.npz", args.vocab, args.seq)
    one = bench_input(work / "bench_input.npz", held_out)

    fp32 = work / "model.onnx"
    t = time.perf_counter()
    export_model(source, fp32, OUTPUTS, params)
    export_s = time.perf_counter() - t
    check = validate(fp32, source, params=params, inputs=held_out, layers=False)
    int8 = work / "model.int8.onnx"
    t = time.perf_counter()
    result = quantize(fp32, int8, "dynamic", QuantizeOptions(per_channel=args.per_channel or None))
    quant_s = time.perf_counter() - t

    strict = work / "model.int8.strict.onnx"
    t = time.perf_counter()
    if args.work and (Path(args.work) / "stop").exists():
        raise SystemExit("stopped before the strict run")
    strict_result = quantize(fp32, strict, "dynamic",
                             QuantizeOptions(per_channel=args.per_channel or None,
                                             accuracy_target=args.strict))
    strict_s = time.perf_counter() - t

    ort_plain: dict = {"skipped": NO_TRAINING}
    if ort_fp32 is not None:
        ort_int8 = work / "ort_model.int8.onnx"
        t = time.perf_counter()
        quantize_dynamic(str(ort_fp32), str(ort_int8), weight_type=QuantType.QInt8)
        ort_quant_s = time.perf_counter() - t
        bench_ort = benchmark([ort_fp32, ort_int8], inputs=one, seconds=args.seconds, threads=args.threads)
        ort_pooled, ort_min = cosine_of(ort_int8, ort_fp32, held_out)
        ort_plain = {"size_ratio": bench_ort.size_ratio, "latency_ratio": bench_ort.latency_ratio,
                     "p50_ms": [m.p50_ms for m in bench_ort.models], "p90_ms": [m.p90_ms for m in bench_ort.models],
                     "throughput": [m.throughput for m in bench_ort.models],
                     "cosine_pooled": ort_pooled, "min_cosine": ort_min, "quantize_seconds": round(ort_quant_s, 2)}

    bench_ours = benchmark([fp32, int8], inputs=one, seconds=args.seconds, threads=args.threads)
    bench_strict = benchmark([fp32, strict], inputs=one, seconds=args.seconds, threads=args.threads)
    ours_pooled, ours_min = cosine_of(int8, fp32, held_out)
    strict_pooled, strict_min = cosine_of(strict, fp32, held_out)
    return {
        "model": {"layers": args.layers, "hidden": args.hidden, "intermediate": 4 * args.hidden,
                  "vocab": args.vocab, "sequence": args.seq, "fp32_bytes": model_size(fp32),
                  "ort_fp32_bytes": model_size(ort_fp32) if ort_fp32 is not None else None,
                  "exported_from": "eval graph + checkpoint" if params is not None else "forward graph"},
        "export": {"seconds": round(export_s, 3), "validation_passed": check.passed,
                   "min_cosine_vs_eval_graph": check.min_cosine},
        "onnxport": {"size_ratio": bench_ours.size_ratio, "latency_ratio": bench_ours.latency_ratio,
                     "p50_ms": [m.p50_ms for m in bench_ours.models], "p90_ms": [m.p90_ms for m in bench_ours.models],
                     "throughput": [m.throughput for m in bench_ours.models],
                     "cosine_pooled": ours_pooled, "min_cosine": ours_min, "quantize_seconds": round(quant_s, 2),
                     "kept_float_nodes": result.kept_float_nodes, "attempts": result.attempts,
                     "per_channel": args.per_channel, "notes": result.notes, "verdict": verdict_of(result)},
        "onnxport_strict": {"target": args.strict, "size_ratio": bench_strict.size_ratio,
                            "latency_ratio": bench_strict.latency_ratio,
                            "p50_ms": [m.p50_ms for m in bench_strict.models],
                            "p90_ms": [m.p90_ms for m in bench_strict.models],
                            "throughput": [m.throughput for m in bench_strict.models],
                            "cosine_pooled": strict_pooled, "min_cosine": strict_min,
                            "quantize_seconds": round(strict_s, 2), "kept_float_nodes": strict_result.kept_float_nodes,
                            "attempts": strict_result.attempts},
        "ort_plain": ort_plain,
        "bench_inputs": bench_ours.inputs, "threads": args.threads,
    }


def bars(data: dict) -> dict[str, bool]:
    ours = data["onnxport"]
    return {
        f"size ratio <= {BARS['size_ratio']}": ours["size_ratio"] <= BARS["size_ratio"],
        "latency ratio < 1": ours["latency_ratio"] < BARS["latency_ratio"],
        f"cosine (pooled) >= {BARS['min_cosine']}": ours["cosine_pooled"] >= BARS["min_cosine"],
        f"export matches its source ({data['model']['exported_from']})": data["export"]["validation_passed"],
    }


def table(data: dict) -> str:
    rows = [("", "size x", "p50 ms fp32 -> int8", "p90 ms fp32 -> int8", "latency x", "cosine pooled", "min cosine")]
    labels = (("ort_plain", "ORT export + quantize_dynamic"), ("onnxport", "onnxport export + quantize"),
              ("onnxport_strict", f"onnxport, target {data['onnxport_strict']['target']}"))
    skipped = []
    for key, label in labels:
        r = data[key]
        if "skipped" in r:
            skipped.append(f"{label}: {r['skipped']}")
            continue
        rows.append((label, f"{r['size_ratio']:.3f}", f"{r['p50_ms'][0]:.2f} -> {r['p50_ms'][1]:.2f}",
                     f"{r['p90_ms'][0]:.2f} -> {r['p90_ms'][1]:.2f}", f"{r['latency_ratio']:.3f}",
                     f"{r['cosine_pooled']:.5f}", f"{r['min_cosine']:.5f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows] + skipped)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench quant_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    case = parser.add_mutually_exclusive_group()
    case.add_argument("--real", action="store_true", help="only the real transformer (all-MiniLM-L6-v2)")
    case.add_argument("--synthetic", action="store_true", help="only the random-weight BERT vs ORT's export")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=384)
    parser.add_argument("--vocab", type=int, default=16000)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--outlier", type=float, default=12.0, help="LayerNorm gain of the outlier dimensions")
    parser.add_argument("--ffn-outlier", type=float, default=25.0, help="bias of 2 outlier FFN channels per layer")
    parser.add_argument("--work", metavar="DIR", help="keep the models in DIR (default: a temp folder)")
    parser.add_argument("--strict", type=float, default=0.999, help="a second, tighter accuracy target")
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--per-channel", action="store_true", help="onnxport: per-channel weight scales")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    verdicts: dict[str, bool] = {}
    with tempfile.TemporaryDirectory(prefix="quant_bench.") as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        if not args.synthetic:
            (work / "real").mkdir(parents=True, exist_ok=True)
            results["real"] = _report_real(quant_real.run(work / "real", args.seconds, args.threads), verdicts)
            (work / "int4").mkdir(parents=True, exist_ok=True)
            dynamic = results["real"].get("rows", {}).get("onnxport_auto", {}).get("size_ratio")
            results["int4"] = _report_int4(quant_int4.run(work / "real", work / "int4", args.seconds, args.threads,
                                                          dynamic), verdicts)
            (work / "cnn").mkdir(parents=True, exist_ok=True)
            results["real_cnn"] = _report_cnn(quant_cnn.run(work / "cnn", args.seconds, args.threads), verdicts)
            results["fp16"] = _report_fp16(quant_fp16.run(_fp16_models(work), work / "fp16"), verdicts)
        if not args.real:
            (work / "synthetic").mkdir(parents=True, exist_ok=True)
            results["synthetic"] = _report_synthetic(run(args, work / "synthetic"), args, verdicts)
    results["bars"] = verdicts
    results["passed"] = all(verdicts.values())
    (OUT / "quant_bench.json").write_text(json.dumps(results, indent=2, default=float) + "\n")
    print(f"wrote {OUT / 'quant_bench.json'}")
    return 0 if results["passed"] else 1


def _say_bars(bars: dict[str, bool], verdicts: dict[str, bool], section: str) -> None:
    """Print each bar of a section as ok/MISS and record it in `verdicts` under the section's name."""
    for name, ok in bars.items():
        print(f"  {'ok  ' if ok else 'MISS'} {name}")
        verdicts[f"{section}: {name}"] = ok


def _report_real(data: dict, verdicts: dict[str, bool]) -> dict:
    print("\n--- real: all-MiniLM-L6-v2, dynamic int8 ---")
    if "skipped" in data:
        print(f"skipped: {data['skipped']}")
        verdicts["real transformer present"] = False
        return data
    path = data["cpu_int8_path"]
    print(f"float32 model: {data['model']['fp32_bytes'] / 1e6:.1f} MB; this CPU's int8 path: {path['label']} "
          f"({path['weight_bits']}-bit weights); latency on {data['inputs']['latency']}, {data['threads']} thread(s)")
    print(quant_real.table(data))
    data["bars"] = quant_real.bars(data)
    data["goals"] = quant_real.goals(data)
    _say_bars(data["bars"], verdicts, "real")
    for name, ok in data["goals"].items():
        print(f"  goal {'met' if ok else 'not met'}: {name}")
    return data


def _report_int4(data: dict, verdicts: dict[str, bool]) -> dict:
    print("\n--- real: all-MiniLM-L6-v2, weight-only int4 vs ONNX Runtime's MatMulNBitsQuantizer ---")
    if "skipped" in data:
        print(f"skipped: {data['skipped']}")
        verdicts["int4: MiniLM present"] = False
        return data
    print(quant_int4.table(data))
    data["bars"] = quant_int4.bars(data)
    _say_bars(data["bars"], verdicts, "int4")
    return data


def _report_cnn(data: dict, verdicts: dict[str, bool]) -> dict:
    print("\n--- real CNN: PP-OCRv4 text detector, static QDQ (avx2 path) ---")
    if "skipped" in data:
        print(f"skipped: {data['skipped']}")
        verdicts["real CNN present"] = False
        return data
    print(f"float32 model: {data['model']['fp32_bytes'] / 1e6:.1f} MB; {data['inputs']}; {data['threads']} thread(s)")
    print(quant_cnn.table(data))
    data["bars"] = quant_cnn.bars(data)
    _say_bars(data["bars"], verdicts, "real CNN")
    return data


def _fp16_models(work: Path) -> list:
    """The float32 models the real sections left (MiniLM's export, the detector) with held-out inputs."""
    models = []
    if (work / "real" / "model.onnx").is_file():
        models.append(("MiniLM", work / "real" / "model.onnx", quant_fp16.minilm_feeds(work / "real" / "held_out.npz")))
    if (detector := quant_cnn.detector()) is not None and (work / "cnn" / "held_out.npy").is_file():
        models.append(("PP-OCRv4 det", detector, [{"x": np.load(work / "cnn" / "held_out.npy")}]))
    return models


def _report_fp16(data: dict, verdicts: dict[str, bool]) -> dict:
    print(f"\n--- float16: onnxport vs {data['peer']} ---")
    print(quant_fp16.table(data))
    data["bars"] = quant_fp16.bars(data)
    _say_bars(data["bars"], verdicts, "fp16")
    return data


def _report_synthetic(data: dict, args: argparse.Namespace, verdicts: dict[str, bool]) -> dict:
    print("\n--- synthetic: random-weight BERT, onnxport vs ORT's export ---")
    data["bars"] = bars(data)
    ort_bytes = data["model"]["ort_fp32_bytes"]
    ort_size = f"{ort_bytes / 1e6:.1f} MB" if ort_bytes is not None else NO_TRAINING
    print(f"float32 model: {data['model']['fp32_bytes'] / 1e6:.1f} MB (ORT's export {ort_size}); "
          f"inputs {data['bench_inputs']}, {args.threads} thread(s)")
    print(table(data))
    kept = data["onnxport"]["kept_float_nodes"]
    print(f"onnxport kept in float to reach cosine >= 0.99: {', '.join(kept) if kept else 'none'}")
    strict = data["onnxport_strict"]
    print(f"with target {strict['target']}: kept in float {', '.join(strict['kept_float_nodes']) or 'none'} "
          f"({len(strict['attempts'])} attempt(s))")
    _say_bars(data["bars"], verdicts, "synthetic")
    return data


if __name__ == "__main__":
    sys.exit(main())
