"""`Throttle`: few reports, but never a jump from the middle of one step into the next."""

from onnxport.core.util.progress import Throttle


def test_a_held_report_is_sent_before_the_next_steps_first():
    sent: list[tuple[float | None, str]] = []
    throttle = Throttle(lambda fraction, message: sent.append((fraction, message)), interval=3600)
    throttle(0.1, "quantizing: preparing")  # the first goes
    throttle(0.4, "quantizing: validating")  # held back
    throttle(0.7, "quantizing: writing m.int8.onnx")  # held back, replacing the one before
    throttle(0.8, "benchmarking: loading m.onnx")  # a new step: the held one first
    throttle(1.0, "benchmarking: done")  # 1.0 always goes
    assert sent == [(0.1, "quantizing: preparing"), (0.7, "quantizing: writing m.int8.onnx"), (1.0, "benchmarking: done")]


def test_reports_of_one_step_are_thinned_by_time():
    sent: list[tuple[float | None, str]] = []
    throttle = Throttle(lambda fraction, message: sent.append((fraction, message)), interval=0)
    for i in range(5):
        throttle(i / 10, f"exporting: {i}")
    assert [f for f, _ in sent] == [0.0, 0.1, 0.2, 0.3, 0.4]
