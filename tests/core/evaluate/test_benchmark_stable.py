"""bench's figures hold still: calibrated runs per timed sample, throughput from p50, the spread."""

from __future__ import annotations

import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.evaluate.benchmark import BenchReport, ModelBench, benchmark, spread_note
from onnxport.core.evaluate.timing import SAMPLE_SECONDS, calibrate_repeat, repeat_ladder, spread_pct

from ..model_builders import make_model
from ..quant_models import save


class FakeClock:
    """A clock that each fake run moves on by `run_seconds`: calibration without real timing."""

    def __init__(self, run_seconds: float) -> None:
        self.now, self.run_seconds = 0.0, run_seconds

    def __call__(self) -> float:
        return self.now

    def run(self) -> None:
        self.now += self.run_seconds


def test_the_repeat_count_grows_until_a_sample_lasts_a_millisecond():
    assert list(repeat_ladder(1000))[:7] == [1, 2, 5, 10, 20, 50, 100] and list(repeat_ladder(30))[-1] == 30
    tiny = FakeClock(6e-6)  # the 0.006 ms the issue saw
    repeat = calibrate_repeat(tiny.run, clock=tiny)
    assert repeat == 200 and repeat * tiny.run_seconds >= SAMPLE_SECONDS
    slow = FakeClock(0.05)
    assert calibrate_repeat(slow.run, clock=slow) == 1
    instant = FakeClock(0.0)
    assert calibrate_repeat(instant.run, clock=instant, cap=50) == 50  # capped


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model = make_model([helper.make_node("Add", ["x", "x"], ["y"], name="add")],
                       [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                       [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])])
    return save(model, tmp_path_factory.mktemp("tiny") / "tiny.onnx")


def test_a_tiny_model_is_timed_over_many_runs_and_throughput_follows_p50(tiny, monkeypatch):
    """The calibrated count (calibrate_repeat, tested on a fake clock above) is each sample's runs;
    here it is fixed, so that nothing depends on how fast this machine runs an Add today."""
    from onnxport.core.evaluate import benchmark as bench_module

    monkeypatch.setattr(bench_module, "SAMPLE_SECONDS", float("inf"))  # no warm-up run counts as long enough
    monkeypatch.setattr(bench_module, "calibrate_repeat", lambda run_once: 7)
    report = benchmark([tiny, tiny], seconds=0.1, min_runs=5)
    for m in report.models:
        assert m.repeat == 7
        assert m.timed_samples >= 6 and m.runs == m.timed_samples * m.repeat
        assert m.throughput == m.batch * 1000.0 / m.p50_ms  # from p50, not the mean
        assert 0 < m.min_ms <= m.p10_ms <= m.p50_ms <= m.p90_ms
        assert m.spread_pct == spread_pct(m.p10_ms, m.p50_ms, m.p90_ms) >= 0
    a, b = report.models
    assert a.timed_samples == b.timed_samples  # alternating rounds
    d = report.to_dict()["models"][0]
    assert {"p10_ms", "p50_ms", "p90_ms", "spread_pct", "repeat", "timed_samples", "throughput"} <= set(d)
    text = "\n".join(report.summary_lines())
    assert "spread" in text and f"{a.timed_samples} timings of {a.repeat}" in text


def test_a_wide_spread_says_the_figures_are_rough():
    def bench(name: str, spread: float) -> ModelBench:
        return ModelBench(name, 10, 0.0, 50, 1, 1.0, 1.2, 1.1, 0.9, 1000.0, p10_ms=0.95, spread_pct=spread)

    assert spread_note([bench("a.onnx", 5.0), bench("b.onnx", 19.9)]) is None
    note = spread_note([bench("a.onnx", 5.0), bench("b.onnx", 35.0)])
    assert note is not None and "b.onnx" in note and "a.onnx" not in note and "rough" in note
    assert BenchReport([bench("a.onnx", 1.0)], "inputs", None, 1.0).to_dict()["models"][0]["spread_pct"] == 1.0
