"""What a quantize job costs, counted with real ONNX Runtime (issue 30, time to quantize): sessions
created per model file, quantize rounds, model runs. No timings: counts only."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from onnxport.core.evaluate import sensitivity
from onnxport.core.evaluate.feeds import input_specs, open_feeds
from onnxport.core.evaluate.validate import ReferenceRuns, validate
from onnxport.core.io.model_io import load_graph
from onnxport.core.quantize import held_out, modes
from onnxport.core.quantize.quantize import CALIBRATION_BATCH, QuantizeOptions, quantize

from .test_held_out import PIN, _two_matmuls


class Ledger:
    """Wraps `onnxruntime.InferenceSession` (the real one runs): sessions created and runs, per source."""

    def __init__(self, monkeypatch) -> None:
        self.sessions: Counter = Counter()
        self.runs: Counter = Counter()
        real, ledger = ort.InferenceSession, self

        class Counted(real):
            def __init__(self, source, *args, **kwargs) -> None:
                self._key = Path(source).name if isinstance(source, str) else "<in memory>"
                ledger.sessions[self._key] += 1
                super().__init__(source, *args, **kwargs)

            def run(self, *args, **kwargs):
                ledger.runs[self._key] += 1
                return super().run(*args, **kwargs)

        monkeypatch.setattr(ort, "InferenceSession", Counted)


@pytest.fixture
def ledger(monkeypatch) -> Ledger:
    return Ledger(monkeypatch)


def _rounds(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = modes.dynamic

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(modes, "dynamic", counted)
    return calls


def test_a_first_attempt_that_meets_the_target_costs_one_quantize_and_one_held_out_run(tmp_path, ledger,
                                                                                        monkeypatch):
    model = _two_matmuls(tmp_path / "m.onnx")
    x = np.random.default_rng(3).standard_normal((64, 256)).astype(np.float32)
    np.savez(tmp_path / "val.npz", x=x)
    rounds = _rounds(monkeypatch)
    result = quantize(model, tmp_path / "q.onnx", "dynamic",
                      QuantizeOptions(int8_path=PIN, validation_inputs=tmp_path / "val.npz"))
    assert result.validation.passed and result.kept_float_nodes == [] and len(rounds) == 1
    feeds = open_feeds(tmp_path / "val.npz", input_specs(load_graph(model)), batch_size=CALIBRATION_BATCH)
    held = len(held_out.split(feeds).held_out)
    assert held >= 2
    # the float model: ORT's pre-processing, and one session (the load check, then the verdict's reference)
    # run once per held-out batch
    assert ledger.sessions["m.onnx"] == 2 and ledger.runs["m.onnx"] == held
    # the quantized file: loaded once (by the verdict), run once per held-out batch (never on the search part)
    assert ledger.sessions["q.onnx"] == 1 and ledger.runs["q.onnx"] == held


def test_the_reference_loads_and_runs_once_across_verdicts(tmp_path, ledger):
    model = _two_matmuls(tmp_path / "m.onnx")
    np.savez(tmp_path / "x.npz", x=np.random.default_rng(4).standard_normal((24, 256)).astype(np.float32))
    refs = ReferenceRuns()
    first = validate(model, model, inputs=tmp_path / "x.npz", layers=False, reuse=refs)
    again = validate(model, model, inputs=tmp_path / "x.npz", layers=False, reuse=refs)
    assert first.batches == again.batches == 3 and refs.runs == 3
    assert [o.cosine for o in first.outputs] == [o.cosine for o in again.outputs]
    # the model checked: 2 sessions; the reference (pruned, in memory): 1 for both calls
    assert ledger.sessions["m.onnx"] == 2 and ledger.sessions["<in memory>"] == 1
    assert ledger.runs["<in memory>"] == 3 and ledger.runs["m.onnx"] == 6


def test_every_tensor_is_compared_on_as_many_rows_as_fit_the_budget(tmp_path, monkeypatch):
    """ORT allocates every exposed tensor of a run: all of MiniLM's for a batch of 8 took GBs."""
    model = _two_matmuls(tmp_path / "m.onnx")
    int8 = tmp_path / "q.onnx"
    modes.dynamic(model, int8, op_types=None, per_channel=False, reduce_range=True, exclude=[], big=False)
    feed = {"x": np.random.default_rng(5).standard_normal((16, 256)).astype(np.float32)}
    two_rows = sensitivity.measure_tensors(int8, model, {"x": feed["x"][:2]})
    assert len(two_rows) >= 3
    per_row = (512 + 512 + 256) * 4  # a, r and y of one row
    monkeypatch.setattr(sensitivity, "TENSOR_BYTES", 2 * per_row + 100)
    rows: list[int] = []
    real_run = ort.InferenceSession.run

    def run(self, names, feed, *args, **kwargs):
        rows.append(len(next(iter(feed.values()))))
        return real_run(self, names, feed, *args, **kwargs)

    monkeypatch.setattr(ort.InferenceSession, "run", run)
    assert sensitivity.measure_tensors(int8, model, feed) == two_rows  # the first two rows' figures
    assert max(rows) == 2 and rows[0] == 1  # one row to size them, then two a run


def test_the_first_attempts_verdict_comes_before_the_search_in_the_progress(tmp_path):
    """The first attempt is judged on held-out inputs before any search: its progress line must not
    read as the end of the job (0.93) and then fall back to the search's fractions."""
    from ..quant_models import outlier_mlp, save

    seen: list[tuple[float, str]] = []
    result = quantize(save(outlier_mlp(), tmp_path / "outlier.onnx"), tmp_path / "q.onnx", "dynamic",
                      QuantizeOptions(int8_path=PIN), progress=lambda f, m: seen.append((f, m)))
    assert result.kept_float_nodes and result.attempts[0]["inputs"] == "held out"
    verdicts = [f for f, m in seen if "held-out" in m]
    search = next(f for f, m in seen if m.startswith("measuring what keeping"))
    assert len(verdicts) == 2 and verdicts[0] <= search < verdicts[1]


def test_nodes_are_kept_in_float_by_gain_per_weight_byte_and_dropped_biggest_first():
    """MiniLM: the 47 MB word embeddings gained about what a 0.6 MB MatMul did; kept first by gain,
    they made the result 0.70x the float size instead of ~0.26x."""
    from onnxport.core.quantize.search import drop_order, keep_order

    gain = {"embeddings/Gather": 0.0015, "layer.2/MatMul": 0.0014, "layer.0/MatMul": 0.012, "idle/MatMul": -0.001}
    cost = {"embeddings/Gather": 47 << 20, "layer.2/MatMul": 2 << 20, "layer.0/MatMul": 2 << 20, "idle/MatMul": 1 << 20}
    assert keep_order(gain, cost) == ["layer.0/MatMul", "layer.2/MatMul", "embeddings/Gather", "idle/MatMul"]
    assert drop_order(["layer.0/MatMul", "embeddings/Gather", "layer.2/MatMul"], cost)[0] == "embeddings/Gather"


def test_weight_bytes_are_the_float_initializers_a_node_reads(tmp_path):
    from onnxport.core.quantize.search import weight_bytes

    model = _two_matmuls(tmp_path / "m.onnx")  # mm1 reads w1[256, 512], mm2 reads w2[512, 256]
    assert weight_bytes(model, ["mm1", "mm2", "relu"]) == {"mm1": 256 * 512 * 4, "mm2": 512 * 256 * 4, "relu": 0}
