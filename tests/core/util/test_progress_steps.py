"""Steps and Monotonic: one job's bar never goes back and each message names its step."""

from __future__ import annotations

from onnxport.core.util.progress import Monotonic, Reporter, Steps


def test_monotonic_holds_the_highest_and_drops_repeats():
    seen = []
    bar = Monotonic(lambda f, m: seen.append((f, m)))
    for f, m in [(0.2, "a"), (0.1, "b"), (None, "c"), (0.5, "d"), (0.5, "d"), (1.5, "e")]:
        bar(f, m)
    assert seen == [(0.2, "a"), (0.2, "b"), (0.2, "c"), (0.5, "d"), (1.0, "e")]


def test_steps_map_name_and_drop_an_earlier_steps_late_word():
    seen = []
    steps = Steps(lambda f, m: seen.append((round(f, 3), m)), [("exporting", 1.0), ("validating", 1.0),
                                                               ("quantizing", 2.0)])
    export = steps.begin("exporting")
    export(0.5, "writing")
    gate = steps.step("validating")
    gate(0.0, "loading")
    export.finished()  # after the validation it ran: dropped
    Reporter(steps.span(["quantizing"]))(0.5, "inner")  # a callee splitting its span again
    steps.finished()
    assert seen == [(0.0, "exporting"), (0.125, "exporting: writing"), (0.25, "validating: loading"),
                    (0.75, "inner"), (1.0, "done")]
