"""Reading a PyTorch source for the import dialog says what it does (not 'describe…' for 28 s)."""

from __future__ import annotations

from onnxport.gui.jobs.core_calls import describe_job


def test_reading_a_pt2_says_what_runs_before_torch_loads_it(tmp_path):
    source = tmp_path / "model.pt2"
    source.write_bytes(b"not a zip")
    said = []
    try:
        describe_job(source)(lambda fraction, message: said.append((fraction, message)), None)
    except Exception:  # noqa: BLE001 - the broken file is refused; what matters is what was said first
        pass
    assert said and said[0][0] is None  # busy, length unknown
    assert said[0][1].startswith("reading model.pt2: loading its torch.export program")
